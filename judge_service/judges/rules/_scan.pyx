# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The rules judge's hottest loops, compiled: a char loop each, where the Python
definitions call the regex engine once per line or sentence and then handle every piece
in the interpreter.

* `plain_links` equals `plain_claims.python_plain_links` (the regex definition);
* `sentences` and `line_sentences` equal `rules_judge.python_sentences` and
  `python_line_sentences`;
* `sentence_units` equals `repetition.python_sentence_units`;
* `disjoint_spans` equals `rules_judge.python_disjoint_spans`.

`tests/test_rules_scan.py` holds each equal to its definition on generated input. The
install builds this module when it can (setup.py; a machine without a C compiler gets
the Python definitions, with the same results); `native.py` says which is in use.
"""

from cpython cimport array
from libc.string cimport memmove
from cpython.unicode cimport Py_UNICODE_ISALNUM, Py_UNICODE_ISSPACE

import array

from judge_service.judges.rules.links import LEFT_STOP, RIGHT_STOP, Link

cdef extern from *:
    """
    static inline int js_mul(long long a, long long b, long long *r) {
        return __builtin_mul_overflow(a, b, r);
    }
    static inline int js_add(long long a, long long b, long long *r) {
        return __builtin_add_overflow(a, b, r);
    }
    """
    bint js_mul(long long a, long long b, long long *r)
    bint js_add(long long a, long long b, long long *r)

cdef Py_ssize_t MAX_CHARS = 400
cdef frozenset NOT_BESIDE = frozenset(LEFT_STOP | RIGHT_STOP)
cdef object new_tuple = tuple.__new__


cdef inline bint is_letter(Py_UCS4 c) noexcept:
    return (c >= 97 and c <= 122) or (c >= 65 and c <= 90)


cdef inline bint is_digit(Py_UCS4 c) noexcept:
    return c >= 48 and c <= 57


cdef inline bint is_sign(Py_UCS4 c) noexcept:
    return c == 45 or c == 43 or c == 0x2212  # - + −


cdef inline bint is_times(Py_UCS4 c) noexcept:
    return c == 42 or c == 0xD7 or c == 0xB7  # * × ·


cdef inline bint is_punct(Py_UCS4 c) noexcept:
    return c == 46 or c == 44 or c == 59  # . , ;


cdef inline Py_ssize_t number_end(str line, Py_ssize_t i, Py_ssize_t n) noexcept:
    """The end of `_NUMBER` (``0|[1-9][0-9]{0,8}``) at i, or -1."""
    if i >= n or not is_digit(line[i]):
        return -1
    if line[i] == 48:  # "0"
        return i + 1
    cdef Py_ssize_t j = i + 1
    while j < n and j - i < 9 and is_digit(line[j]):
        j += 1
    return j


cdef inline Py_ssize_t expression_end(str line, Py_ssize_t i, Py_ssize_t n) noexcept:
    """The end of the longest `_EXPRESSION` at i, or -1."""
    if i < n and is_sign(line[i]):
        i += 1
    cdef Py_ssize_t j = number_end(line, i, n)
    cdef Py_ssize_t k
    if j < 0:
        return -1
    while j + 3 < n and line[j] == 32 and line[j + 2] == 32:
        if not (is_sign(line[j + 1]) or is_times(line[j + 1])):
            break
        k = number_end(line, j + 3, n)
        if k < 0:
            break
        j = k
    return j


cdef inline long long digits(str line, Py_ssize_t i, Py_ssize_t j) noexcept:
    cdef long long v = 0
    while i < j:
        v = v * 10 + (<long long>line[i] - 48)
        i += 1
    return v


cdef object side_value(str line, Py_ssize_t i, Py_ssize_t j, int *ops):
    """(value, operations) of the expression line[i:j], as `plain_claims._value` gives
    them: products before sums, left to right; checked C arithmetic, and Python's ints
    past 64 bits."""
    cdef bint negative = False
    cdef Py_ssize_t k, m, first = i
    cdef long long total = 0, term, operand, sign = 1, signed_term = 0
    cdef bint overflow = False
    cdef Py_UCS4 op
    if is_sign(line[i]):
        negative = line[i] != 43
        i += 1
    k = number_end(line, i, j)
    term = digits(line, i, k)
    if negative:
        term = -term
    ops[0] = 0
    while k < j:
        op = line[k + 1]
        m = number_end(line, k + 3, j)
        operand = digits(line, k + 3, m)
        ops[0] += 1
        if is_times(op):
            overflow = overflow or js_mul(term, operand, &term)
        else:
            overflow = overflow or js_mul(sign, term, &signed_term)
            overflow = overflow or js_add(total, signed_term, &total)
            sign = -1 if op != 43 else 1
            term = operand
        k = m
    overflow = overflow or js_mul(sign, term, &signed_term)
    overflow = overflow or js_add(total, signed_term, &total)
    if overflow:
        return python_value(line[first:j])
    return total


cdef object python_value(str expression):
    from judge_service.judges.rules.plain_claims import python_value as value
    return value(expression)[0]


def plain_links(str line):
    """`find_links(line)` when the line is plain, else None (`plain_claims`)."""
    cdef Py_ssize_t n = len(line)
    if n > MAX_CHARS or n == 0:
        return None
    # The grammar, item by item; each chain with the item before it and the word after.
    cdef list chains = []  # (start, end, word or None, punct or None, after or None)
    cdef Py_ssize_t i = 0, j, e, t
    cdef Py_UCS4 c
    cdef object before_word = None, before_punct = None
    cdef bint first = True
    cdef int sides
    while True:
        c = line[i]
        if is_letter(c):
            j = i + 1
            while j < n and is_letter(line[j]):
                j += 1
            if j < n and is_punct(line[j]):
                before_word, before_punct = None, line[j]
                j += 1
            else:
                before_word, before_punct = line[i:j], None
        else:
            e = expression_end(line, i, n)
            if e < 0:
                return None
            sides = 1
            while e + 3 < n and line[e] == 32 and line[e + 1] == 61 and line[e + 2] == 32:
                t = expression_end(line, e + 3, n)
                if t < 0:
                    break
                e = t
                sides += 1
            if sides < 2:
                return None
            j = e
            after = None
            if j < n and is_punct(line[j]):
                j += 1
            elif j + 1 < n and line[j] == 32 and is_letter(line[j + 1]):
                t = j + 1
                while t < n and is_letter(line[t]):
                    t += 1
                after = line[j + 1 : t]
            else:
                t = j
                while t < n and line[t] == 32:
                    t += 1
                if t < n:
                    return None
            chains.append((i, e, None if first else before_word, None if first else before_punct, after))
            if j > e:
                before_word, before_punct = None, line[e]
            else:
                before_word, before_punct = None, None  # only a word can follow: its own
        first = False
        # Between items: one space, or spaces to the end.
        if j >= n:
            break
        if line[j] != 32:
            return None
        t = j
        while t < n and line[t] == 32:
            t += 1
        if t >= n:
            break
        if t != j + 1:
            return None
        i = j + 1
    cdef list links = []
    for chain in chains:
        if not append_links(line, chain, links):
            return None
    return links


cdef bint append_links(str line, tuple chain, list links) except -1:
    """The links of one chain (`plain_claims.python_plain_links`' loop body); False when
    a word beside it makes the line not plain."""
    cdef Py_ssize_t start = chain[0], end = chain[1], position, rs, re_
    word, punct, after = chain[2], chain[3], chain[4]
    if word is not None and (len(word) == 1 or word.lower() in NOT_BESIDE):
        return False
    if after is not None and (len(after) == 1 or after.lower() in NOT_BESIDE):
        return False
    cdef int lops = 0, rops = 0
    cdef Py_ssize_t le = expression_end(line, start, end)
    lt = line[start:le]
    lv = side_value(line, start, le, &lops)
    cdef bint usable = (word is None and punct is None) or (
        lops > 0 and (punct == "," or punct == ";" or is_digit(line[start]))
    )
    position = start
    while le < end:
        rs = le + 3
        re_ = expression_end(line, rs, end)
        rt = line[rs:re_]
        rv = side_value(line, rs, re_, &rops)
        if usable:
            links.append(
                new_tuple(
                    Link,
                    (position, le, rs, re_, lt, rt, lv, rv, lv == rv, lops == 0 and rops == 0, False),
                )
            )
        usable = True
        position, le, lt, lv, lops = rs, re_, rt, rv, rops
    return True


def sentences(str line):
    """A line's sentences as (start, end, text), surrounding whitespace excluded: the
    pieces between separators (a whitespace run after ``. ! ? 。``), stripped, empty ones
    dropped (`rules_judge.python_sentences`)."""
    cdef Py_ssize_t n = len(line), i = 0, piece = 0, a, b
    cdef list out = []
    cdef Py_UCS4 c, previous = 0
    while True:
        # The next separator from i: a whitespace run whose first char follows an end.
        while i < n:
            c = line[i]
            if Py_UNICODE_ISSPACE(c) and (
                previous == 46 or previous == 33 or previous == 63 or previous == 0x3002
            ):
                break
            previous = c
            i += 1
        a, b = piece, i
        while a < b and Py_UNICODE_ISSPACE(line[a]):
            a += 1
        while b > a and Py_UNICODE_ISSPACE(line[b - 1]):
            b -= 1
        if b > a:
            out.append((a, b, line[a:b]))
        if i >= n:
            return out
        while i < n and Py_UNICODE_ISSPACE(line[i]):
            i += 1
        piece = i
        previous = 0


def line_sentences(str text):
    """(line number, where it starts, `sentences` of it) of every line that is not blank
    (`rules_judge.python_line_sentences`)."""
    cdef list out = []
    cdef Py_ssize_t n = len(text), start = 0, end, stop, k, number = 0
    cdef bint blank
    while True:
        end = text.find("\n", start)
        if end < 0:
            end = n
        stop = end
        while stop > start and text[stop - 1] == 13:  # "\r"
            stop -= 1
        blank = True
        k = start
        while k < stop:
            if not Py_UNICODE_ISSPACE(text[k]):
                blank = False
                break
            k += 1
        if not blank:
            out.append((number, start, sentences(text[start:stop])))
        if end >= n:
            return out
        start = end + 1
        number += 1


cdef inline bint word_char(Py_UCS4 c) noexcept:
    if c < 128:
        return is_letter(c) or is_digit(c)
    return Py_UNICODE_ISALNUM(c)


cdef inline bint connector(Py_UCS4 c) noexcept:
    # . , / ^ * + = × ·
    return (c == 46 or c == 44 or c == 47 or c == 94 or c == 42 or c == 43 or c == 61
            or c == 0xD7 or c == 0xB7)


cdef list words_of(str s):
    """`repetition.normalise(s)`."""
    cdef list words = []
    cdef bint ascii = s.isascii()
    cdef str lowered = s.lower() if ascii else s
    cdef Py_ssize_t n = len(s), i = 0, j
    while i < n:
        if not word_char(s[i]):
            i += 1
            continue
        j = i + 1
        while j < n:
            if word_char(s[j]):
                j += 1
            elif connector(s[j]) and j + 1 < n and word_char(s[j + 1]):
                j += 2
            else:
                break
        words.append(lowered[i:j] if ascii else s[i:j].lower())
        i = j
    return words


def sentence_units(sentences, Py_ssize_t min_chars, Py_ssize_t min_words):
    """`repetition.python_sentence_units`: the exact repeats, and the sentences left to
    compare by trigrams with their word ids (int64 bytes), word counts and vocabulary."""
    cdef list repeats = [], units = [], lengths = []
    cdef set seen = set()
    cdef dict vocabulary = {}
    cdef array.array ids = array.array("q")
    cdef Py_ssize_t k = 0, count, chars, at
    cdef list found
    cdef str s
    for s in sentences:
        found = words_of(s)
        count = len(found)
        chars = count - 1
        for word in found:
            chars += len(<str>word)
        if chars < min_chars or count < min_words:
            k += 1
            continue
        joined = " ".join(found)
        if joined in seen:
            repeats.append(k)
            k += 1
            continue
        seen.add(joined)
        units.append(k)
        lengths.append(count)
        at = len(ids)
        array.resize_smart(ids, at + count)
        for word in found:
            index = vocabulary.get(word)
            if index is None:
                index = len(vocabulary)
                vocabulary[word] = index
            ids.data.as_longlongs[at] = index
            at += 1
        k += 1
    return repeats, units, ids.tobytes(), lengths, len(vocabulary)


cdef inline Py_ssize_t upper_bound(long long *s, Py_ssize_t n, long long value) noexcept:
    """The first of the n sorted s[] above value (bisect_right)."""
    cdef Py_ssize_t lo = 0, hi = n, mid
    while lo < hi:
        mid = (lo + hi) // 2
        if s[mid] <= value:
            lo = mid + 1
        else:
            hi = mid
    return lo


def disjoint_spans(list firsts, list lasts):
    """`rules_judge.python_disjoint_spans`: the taken ranges kept in two C arrays by start,
    where the definition bisects and inserts into Python lists."""
    cdef Py_ssize_t n = len(firsts), taken = 0, index, at, lo
    cdef long long start, end
    cdef array.array starts = array.array("q", [0]) * max(n, 1)
    cdef array.array ends = array.array("q", [0]) * max(n, 1)
    cdef long long *s = starts.data.as_longlongs
    cdef long long *e = ends.data.as_longlongs
    cdef list out = []
    for index in range(n):
        start, end = firsts[index], lasts[index]
        at = upper_bound(s, taken, start) - 1  # the last taken range starting at or before
        while 0 <= at < taken and s[at] <= start < e[at]:
            start = e[at]
            at += 1
        lo = upper_bound(s, taken, start)
        if lo < taken and s[lo] < end:
            end = s[lo]
        if start >= end:
            continue
        memmove(&s[lo + 1], &s[lo], (taken - lo) * sizeof(long long))
        memmove(&e[lo + 1], &e[lo], (taken - lo) * sizeof(long long))
        s[lo], e[lo] = start, end
        taken += 1
        out.append((index, start, end))
    return out
