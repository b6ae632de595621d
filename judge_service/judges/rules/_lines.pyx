# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""`claims.python_line_links`, compiled: one line of a trace read for its links in one scan
of its chars, without cutting it out, when nothing in it needs a rewrite.

The definition cuts the line, asks `forms.may_claim`, then `find_links` (the checker form:
digits folded, markup blanked, operator and relation words rewritten; then the plain or the
lexed reading, chains, units, algebra). Most lines of a long trace need none of that: no
char that `fold_digits` changes, no markup, no word to rewrite, and either no ``=`` or a
plain line whose every ``=`` is a link. Those are decided here; any other line goes to the
definition, which therefore decides every doubtful case. Where this scan rules a rewrite
out it reads the definition's trigger and relation-word patterns char by char (ASCII, as
a case-blind regex matches them); a char past ASCII that a case-blind regex may match to
one of their letters ("ı", "ſ") hands the search to that regex.
`tests/test_rules_lines.py` holds the two equal.
"""

from cpython.unicode cimport PyUnicode_READ_CHAR
from libc.string cimport strlen
from judge_service.judges.rules._chars cimport Chars, char_at, chars_of, is_digit, is_letter

import re

from judge_service.judges.rules._plain import plain_links
from judge_service.judges.rules.forms import RELATION_REWRITE
from judge_service.judges.rules.forms import REWRITE_TRIGGER as WORDS_TRIGGER
from judge_service.judges.rules.links import MAX_READ_CHARS
from judge_service.reading.markup import LIST_MARKER
from judge_service.reading.numbers import FOLD_TABLE

cdef enum:
    KEPT = 1
    EQUALS = 2
    DIGIT = 3
    OTHER = 4

cdef object _definition = None  # claims.python_line_links, bound on first use (claims imports us)
# What `fold_digits` does to each code point past ASCII (`fold_of`; 0: not asked yet).
# Filled from its table as chars are met.
cdef unsigned char folds[0x110000]


cdef object definition():
    global _definition
    if _definition is None:
        from judge_service.judges.rules.claims import python_line_links

        _definition = python_line_links
    return _definition


cdef inline unsigned char fold_of(Py_UCS4 c) except 0:
    """KEPT, or what `fold_digits` makes of `c`: EQUALS, DIGIT or OTHER."""
    cdef unsigned char state = folds[c]
    if state == 0:
        mapped = FOLD_TABLE[<long>c]  # computed and kept by the table on first sight
        if len(mapped) == 1 and PyUnicode_READ_CHAR(mapped, 0) == c:
            state = KEPT
        elif mapped == "=":
            state = EQUALS
        elif mapped.isdigit():
            state = DIGIT
        else:
            state = OTHER
        folds[c] = state
    return state


cdef inline bint is_space(Py_UCS4 c) noexcept:
    if c < 128:
        return c == 32 or (c >= 9 and c <= 13) or (c >= 28 and c <= 31)
    return Py_UNICODE_ISSPACE(c)


cdef extern from "Python.h":
    bint Py_UNICODE_ISSPACE(Py_UCS4 c)
    bint Py_UNICODE_ISALNUM(Py_UCS4 c)


# The words of `forms.REWRITE_TRIGGER` and of `forms.RELATION_REWRITE` (lower case).
cdef const char *TRIGGER_WORDS[11]
TRIGGER_WORDS[:] = [
    b"times", b"multiplied", b"plus", b"minus", b"divided", b"is", b"equals", b"gives",
    b"makes", b"yields", b"of",
]
cdef const char *RELATION_WORDS[6]
RELATION_WORDS[:] = [b"is equal to", b"equals", b"is", b"gives", b"makes", b"yields"]
cdef enum:
    UNSURE = -1  # a letter past ASCII where a word is read: the regex decides
# Whether a char past ASCII matches an ASCII letter in a pattern compiled with IGNORECASE
# ("ı", "ſ", "K" do): 0 not asked yet, 1 no, 2 yes. Asked of the regex engine itself.
cdef unsigned char ascii_fold[0x110000]
_ASCII_LETTER = re.compile("[a-z]", re.IGNORECASE)


cdef inline bint folds_to_ascii(Py_UCS4 c) except -1:
    if ascii_fold[c] == 0:
        ascii_fold[c] = 2 if _ASCII_LETTER.match(chr(c)) is not None else 1
    return ascii_fold[c] == 2


cdef inline bint is_word_char(Py_UCS4 c) noexcept:
    """The regex engine's ``\\w`` (and so ``\\b``) on str patterns."""
    if c < 128:
        return is_letter(c) or is_digit(c) or c == 95
    return Py_UNICODE_ISALNUM(c)


cdef inline int word_at(Chars chars, Py_ssize_t k, Py_ssize_t end, const char *word) except -2:
    """Whether ``text[k:end]`` starts with `word` (lower-case ASCII), as a pattern compiled
    with IGNORECASE reads it: an ASCII letter matches its own two cases only; a char past
    ASCII that matches some ASCII letter may match this one: UNSURE."""
    cdef Py_ssize_t t = 0
    cdef Py_UCS4 c
    cdef unsigned int code
    while word[t] != 0:
        if k + t >= end:  # the engine matches char for char: no fold makes two of one
            return 0
        c = char_at(chars, k + t)
        if c >= 128:
            return UNSURE if folds_to_ascii(c) else 0
        code = <unsigned int>c
        if 65 <= code <= 90:
            code += 32
        if code != <unsigned char>word[t]:
            return 0
        t += 1
    return 1


cdef int trigger_after(Chars chars, Py_ssize_t k, Py_ssize_t end) except -2:
    """`REWRITE_TRIGGER`'s words branch from `k`, the first char after its blank run: one
    of the words, then a word boundary (1, 0 or UNSURE)."""
    cdef int found, unsure = 0, w
    cdef Py_ssize_t after
    cdef unsigned int first
    if k >= end:
        return 0
    first = <unsigned int>char_at(chars, k)
    if first < 128:  # most blank runs: a word no trigger word begins like
        if 65 <= first <= 90:
            first += 32
        # times multiplied plus minus divided is equals gives makes yields of
        if not (first == 116 or first == 109 or first == 112 or first == 100 or first == 105
                or first == 101 or first == 103 or first == 121 or first == 111):
            return 0
    for w in range(11):
        found = word_at(chars, k, end, TRIGGER_WORDS[w])
        if found == UNSURE:
            unsure = 1
        elif found:
            after = k + <Py_ssize_t>strlen(TRIGGER_WORDS[w])
            if after >= end or not is_word_char(char_at(chars, after)):
                return 1
    return UNSURE if unsure else 0


cdef bint words_to_rewrite(str text, Chars chars, Py_ssize_t start, Py_ssize_t end) except -1:
    """Whether `forms.REWRITE_TRIGGER` matches in ``text[:end]`` from `start` on. A match
    begins at one of ``[0-9)%]``: after blank space one of its words and a word boundary,
    or a digit, ``x`` and a digit, a space allowed either side of the ``x``. Both are
    read here, char by char; only where a char past ASCII stands in a word's place (it
    may fold to one of its letters) does the regex search, once, from that place on."""
    cdef Py_ssize_t i, k, j
    cdef Py_UCS4 c, d
    cdef int found
    for i in range(start, end - 1):
        c = char_at(chars, i)
        if not (is_digit(c) or c == 41 or c == 37):  # ) %
            continue
        d = char_at(chars, i + 1)
        if is_space(d):
            k = i + 1
            while k < end and is_space(char_at(chars, k)):
                k += 1
            found = trigger_after(chars, k, end)
            if found == UNSURE:
                return WORDS_TRIGGER.search(text, i, end) is not None
            if found:
                return True
        if is_digit(c):
            j = i + 1
            if char_at(chars, j) == 32:
                j += 1
            if j < end and (char_at(chars, j) == 120 or char_at(chars, j) == 88):  # x X
                j += 1
                if j < end and char_at(chars, j) == 32:
                    j += 1
                    if j < end and is_digit(char_at(chars, j)):
                        return True
                elif j < end and is_digit(char_at(chars, j)):
                    return True
    return False


cdef bint relation_to_rewrite(str text, Chars chars, Py_ssize_t start, Py_ssize_t end) except -1:
    """Whether `forms.RELATION_REWRITE` matches in ``text[start:end]``: after a digit or
    ``)``, blank space, a relation word, blank space and a number (a sign or ``(`` may
    open it). Read char by char as `words_to_rewrite` reads its trigger."""
    cdef Py_ssize_t i, k, j
    cdef Py_UCS4 c
    cdef int found, w
    cdef bint unsure
    for i in range(start, end - 1):
        c = char_at(chars, i)
        if not (is_digit(c) or c == 41) or not is_space(char_at(chars, i + 1)):
            continue
        k = i + 1
        while k < end and is_space(char_at(chars, k)):
            k += 1
        unsure = False
        for w in range(6):
            found = word_at(chars, k, end, RELATION_WORDS[w])
            if found == UNSURE:
                unsure = True
            elif found:
                j = k + <Py_ssize_t>strlen(RELATION_WORDS[w])
                if j >= end or not is_space(char_at(chars, j)):
                    continue
                while j < end and is_space(char_at(chars, j)):
                    j += 1
                if j < end and (char_at(chars, j) == 45 or char_at(chars, j) == 0x2212
                                or char_at(chars, j) == 40):  # - − (
                    j += 1
                if j < end and is_digit(char_at(chars, j)):
                    return True
        if unsure:
            return RELATION_REWRITE.search(text, i, end) is not None
    return False


cdef bint list_marker(str text, Chars chars, Py_ssize_t base, Py_ssize_t end) except -1:
    """Whether the line ``text[base:end]`` starts with a list marker ("1. ", "+ "), which
    is markup (`markup.may_have_markup`)."""
    cdef Py_ssize_t i = base
    cdef Py_UCS4 c
    while i < end and is_space(char_at(chars, i)):
        i += 1
    if i >= end:
        return False
    c = char_at(chars, i)
    if is_digit(c) or c == 43 or c == 42 or c == 0x2022:
        return LIST_MARKER.match(text[i:min(i + 6, end)]) is not None
    return False


cdef list chained(list links):
    """`claims.chained`: a chain's bare step that does not hold made non-trivial."""
    cdef Py_ssize_t k
    cdef object link, before  # Link: a tuple subclass, read by index
    for k in range(1, len(links)):
        link, before = links[k], links[k - 1]
        # left_start < before.right_end and not before.trivial; link.trivial, not link.holds
        if link[0] < before[3] and not before[9] and link[9] and not link[8]:
            links[k] = link._replace(trivial=False)
    return links


def line_links(str text, Py_ssize_t base, Py_ssize_t stop):
    """The links of the line ``text[base:stop]`` (its ``\\r\\n`` end not read), offsets
    relative to the line: `claims.python_line_links`."""
    cdef Chars chars = chars_of(text)
    cdef Py_ssize_t end = stop, i, first_digit = -1, equals = 0
    cdef Py_UCS4 c, previous = 0
    cdef unsigned char fold
    cdef bint markup = False, folds_to_equals = False, folds_to_digit = False, folded = False
    while end > base and (char_at(chars, end - 1) == 10 or char_at(chars, end - 1) == 13):
        end -= 1
    for i in range(base, end):
        c = char_at(chars, i)
        if c < 128:
            if c == 61:
                equals += 1
            elif is_digit(c):
                if first_digit < 0:
                    first_digit = i
            elif c == 92 or c == 36 or c == 35:  # \ $ #
                markup = True
            elif (c == 42 or c == 95) and previous == c:  # ** __
                markup = True
        else:
            fold = fold_of(c)
            if fold != KEPT:
                folded = True
                folds_to_equals = folds_to_equals or fold == EQUALS
                folds_to_digit = folds_to_digit or fold == DIGIT
        previous = c
    if equals == 0 and not folds_to_equals:
        # `may_claim` without an equals sign: a relation word after the first ASCII digit
        # of the line as written (markup and other chars do not matter to it); without an
        # ASCII digit, only a digit that folding makes would let it look further.
        if first_digit < 0:
            return definition()(text, base, stop) if folds_to_digit else []
        if not words_to_rewrite(text, chars, first_digit, end):
            return []
        # `may_claim` says yes ("38118 of thousand", "3 times a day"): `find_links` reads
        # the checker form, which gains an "=" only where the rewrite turns a relation word
        # into one. With no markup and no folded char that form is the line rewritten, and
        # `RELATION_REWRITE` is that branch of the rewrite: no match, no "=", no link.
        if markup or folded or list_marker(text, chars, base, end):
            return definition()(text, base, stop)
        if not relation_to_rewrite(text, chars, base, end):
            return []
        return definition()(text, base, stop)
    if first_digit < 0 and not folded:
        return []  # `find_links` reads nothing without a digit, and masking makes none
    if markup or folded or first_digit < 0:
        return definition()(text, base, stop)  # a checker form that differs from the line
    if list_marker(text, chars, base, end):
        return definition()(text, base, stop)
    cdef str line = text[base:end]
    cdef Chars cline = chars_of(line)
    cdef Py_ssize_t n = end - base
    if words_to_rewrite(line, cline, 0, n):
        return definition()(text, base, stop)
    plain = plain_links(line)
    if plain is None:
        return definition()(text, base, stop)
    found = chained(plain)
    if len(found) < equals and n <= MAX_READ_CHARS:
        return definition()(text, base, stop)  # units and algebra may read the rest
    return found
