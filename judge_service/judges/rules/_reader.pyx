# cython: language_level=3, boundscheck=False, wraparound=False
"""`reader.PythonReader`, compiled: the same walk over a trace's lines with the same state,
its per-claim work in C calls rather than bytecode, and two of the definition's regex and
string passes (`python_numbers`, `python_normal`) as one char pass each.
`tests/test_rules_reader.py` holds the two readers equal; setup.py builds this module
where it can.
"""

from fractions import Fraction

from cpython cimport array
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.unicode cimport (
    Py_UNICODE_ISALNUM,
    Py_UNICODE_ISDECIMAL,
    Py_UNICODE_ISSPACE,
    PyUnicode_4BYTE_KIND,
    PyUnicode_FromKindAndData,
)

from judge_service.judges.rules._chars cimport Chars, char_at, chars_of

from judge_service import labels as L
from judge_service.judges.rules.claims import line_links
from judge_service.judges.rules.reader import (
    _CORRECTION_WORDS,
    CONFIDENCE,
    FALSE,
    TAINTED,
    TRUE,
    Finding,
    _as_plain,
    python_normal,
)

cdef str INVALID = L.INVALID
cdef str UNSUPPORTED = L.UNSUPPORTED
cdef str VERIFIED_CORRECTION = L.VERIFIED_CORRECTION
cdef str VALID_PROGRESS = L.VALID_PROGRESS
cdef str UNPRODUCTIVE_REPETITION = L.UNPRODUCTIVE_REPETITION
cdef dict CONFIDENCES = dict(CONFIDENCE)
cdef object new_tuple = tuple.__new__
cdef long LINK_FALSE = FALSE, LINK_TAINTED = TAINTED, LINK_TRUE = TRUE


cdef void add_kinds(
    Py_ssize_t base, list links, list findings, Py_ssize_t at, object read
) except *:
    """`reader.LinkKinds.add(base, links, findings[at:])`: each non-trivial link of the
    line, in order, paired with the finding the reader gave it (its first ones)."""
    cdef array.array kinds = read.kinds, lows = read.lows, highs = read.highs
    cdef Py_ssize_t stop = len(findings), size
    cdef long long kind
    cdef tuple link, finding
    for item in links:
        link = <tuple> item
        if link[9]:  # trivial
            continue
        if at >= stop:
            break
        finding = <tuple> findings[at]
        at += 1
        if not link[8]:
            kind = LINK_FALSE
        elif finding[2] == UNSUPPORTED:
            kind = LINK_TAINTED
        else:
            kind = LINK_TRUE
        # In place (the arrays grow by half again when full): no int object a value.
        size = len(kinds)
        array.resize_smart(kinds, size + 1)
        array.resize_smart(lows, size + 1)
        array.resize_smart(highs, size + 1)
        kinds.data.as_longlongs[size] = kind
        lows.data.as_longlongs[size] = base + <Py_ssize_t> link[0]  # left_start
        highs.data.as_longlongs[size] = base + <Py_ssize_t> link[3]  # right_end


cdef inline bint is_word(Py_UCS4 c) noexcept:
    # The regex module's \w for str patterns: alphanumeric by Unicode, or "_".
    return c == 95 or Py_UNICODE_ISALNUM(c)


cdef Py_ssize_t next_number(Chars t, Py_ssize_t n, Py_ssize_t *at) noexcept:
    """The end of the first number (`numbers`' match) at or after at[0], which is moved to
    its start; -1 when there is none. A greedy match that fails the lookahead has no
    shorter one that passes (a shorter digit run is followed by a digit, a dropped
    decimal part by ".digit"), so one forward pass decides each start."""
    cdef Py_ssize_t i = at[0], j, k
    cdef Py_UCS4 c
    while i < n:
        if i > 0:
            c = char_at(t, i - 1)
            if c == 46 or is_word(c):
                i += 1
                continue
        j = i + 1 if char_at(t, i) == 45 else i  # "-"
        k = j
        while k < n and Py_UNICODE_ISDECIMAL(char_at(t, k)):
            k += 1
        if k == j:
            i += 1
            continue
        if k + 1 < n and char_at(t, k) == 46 and Py_UNICODE_ISDECIMAL(char_at(t, k + 1)):
            k += 2
            while k < n and Py_UNICODE_ISDECIMAL(char_at(t, k)):
                k += 1
        if k < n:
            c = char_at(t, k)
            if is_word(c) or (
                c == 46 and k + 1 < n and Py_UNICODE_ISDECIMAL(char_at(t, k + 1))
            ):
                i += 1
                continue
        at[0] = i
        return k
    return -1


cpdef list numbers(str text):
    """`reader.python_numbers`: each match of ``(?<![\\w.])-?\\d+(?:\\.\\d+)?(?![\\w]|\\.\\d)``
    in order."""
    cdef Chars t = chars_of(text)
    cdef Py_ssize_t n = len(text), i = 0, k
    cdef list out = []
    while True:
        k = next_number(t, n, &i)
        if k < 0:
            return out
        out.append(text[i:k])
        i = k


cdef object number_value(Chars t, str text, Py_ssize_t i, Py_ssize_t k, bint magnitude):
    """The number text[i:k] (a `numbers` match) as `reader._plain` reads it, or its
    magnitude: an integer of up to 18 ASCII digits straight from its chars (a per-claim
    cost: no substring, no parse of one), anything else by the definition."""
    cdef bint negative = char_at(t, i) == 45
    cdef Py_ssize_t j = i + 1 if negative else i
    cdef long long value = 0
    cdef Py_UCS4 c
    if k - j <= 18:
        while j < k:
            c = char_at(t, j)
            if c < 48 or c > 57:  # a decimal point, or a digit of another script
                break
            value = value * 10 + (<long long> c - 48)
            j += 1
        if j == k:
            return -value if negative and not magnitude else value
    found = plain_number(text[i:k])
    return abs(found) if magnitude else found


cpdef str normal(str expression):
    """`reader.python_normal`: whitespace dropped and the one-char spellings of an
    operation mapped in one pass; a side with a backslash (a LaTeX command) is left to the
    definition."""
    cdef Chars t = chars_of(expression)
    cdef Py_ssize_t n = len(expression)
    cdef Py_ssize_t i, size = 0
    cdef Py_UCS4 c
    cdef Py_UCS4 *buffer = <Py_UCS4 *> PyMem_Malloc((n + 1) * sizeof(Py_UCS4))
    if buffer == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            c = char_at(t, i)
            if c == 92:  # "\\"
                return python_normal(expression)
            if Py_UNICODE_ISSPACE(c):
                continue
            if c == 0xB7 or c == 42:  # · *
                c = 0xD7  # ×
            elif c == 0xF7:  # ÷
                c = 47
            elif c == 0x2212:  # −
                c = 45
            buffer[size] = c
            size += 1
        return PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, buffer, size)
    finally:
        PyMem_Free(buffer)


cdef inline object plain_number(str number):
    return Fraction(number) if "." in number else int(number)


cdef void add_magnitudes(str text, list values) except *:
    cdef Chars t = chars_of(text)
    cdef Py_ssize_t n = len(text), i = 0, k
    while True:
        k = next_number(t, n, &i)
        if k < 0:
            return
        values.append(number_value(t, text, i, k, True))
        i = k


cdef tuple relation(str side, str right):
    """`reader._relation(side, right)`: each number's magnitude, an int or (with a
    decimal point) a Fraction, whichever branch of the definition reads it."""
    cdef list values = []
    add_magnitudes(side, values)
    add_magnitudes(right, values)
    values.sort()
    return tuple(values)


cdef class Reader:
    """`reader.PythonReader`: its attributes, its `read_lines` and `read_line`."""

    cdef readonly list findings
    cdef readonly dict errors
    cdef readonly set tainted
    cdef readonly set tainted_numbers
    cdef readonly set claims
    cdef readonly dict rechecks

    def __init__(self):
        self.findings = []
        self.errors = {}
        self.tainted = set()
        self.tainted_numbers = set()
        self.claims = set()
        self.rechecks = {}

    def read_lines(self, lines, links_of, repeated_flags, kinds=None):
        cdef tuple line
        cdef list found
        cdef Py_ssize_t before
        cdef list findings = self.findings
        for line in lines:
            found = links_of(line[0])
            before = len(findings)
            self.read_line(line[1], found, line[2], repeated_flags)
            if kinds is not None and found:
                add_kinds(<Py_ssize_t> line[1], found, findings, before, kinds)

    def read_text_lines(self, str text, list starts, lines, repeated_flags, kinds=None):
        """`read_lines`, each line's links `claims.line_links(text, starts[n], stop)` (stop:
        the next line's start, else the text's end), as `grounding.TraceLinks.links` reads
        them; asked from C, not through a Python method a line."""
        cdef tuple line
        cdef list found
        cdef Py_ssize_t before, number, count = len(starts), size = len(text)
        cdef list findings = self.findings
        for line in lines:
            number = line[0]
            found = line_links(
                text, starts[number], starts[number + 1] if number + 1 < count else size
            )
            before = len(findings)
            self.read_line(line[1], found, line[2], repeated_flags)
            if kinds is not None and found:
                add_kinds(<Py_ssize_t> line[1], found, findings, before, kinds)

    cpdef read_line(self, Py_ssize_t base, list links, list sentences, repeated_flags):
        cdef list claim_findings = self._claims(links, base) if links else []
        cdef tuple f, match
        cdef bint strong = False, claimed, repeated
        cdef Py_ssize_t start, end
        self.findings.extend(claim_findings)
        for item in claim_findings:  # Findings: (char_start, char_end, label, confidence)
            f = <tuple> item
            strong = strong or f[2] != VALID_PROGRESS
        for match in sentences:
            start = base + <Py_ssize_t> match[0]
            end = base + <Py_ssize_t> match[1]
            repeated = next(repeated_flags)
            claimed = strong
            for item in claim_findings:
                f = <tuple> item
                claimed = claimed or (<Py_ssize_t> f[0] < end and start < <Py_ssize_t> f[1])
            if claimed:
                if repeated and not strong:
                    self._add(start, end, UNPRODUCTIVE_REPETITION)
                continue
            if repeated:
                self._add(start, end, UNPRODUCTIVE_REPETITION)
            elif self._uses_tainted(match[2]) and not _CORRECTION_WORDS.search(match[2]):
                self._add(start, end, UNSUPPORTED)

    cdef void _add(self, Py_ssize_t start, Py_ssize_t end, str label) except *:
        self.findings.append(new_tuple(Finding, (start, end, label, CONFIDENCES[label])))

    cdef bint _uses_tainted(self, str text) except -1:
        if not self.tainted_numbers:
            return False
        cdef set tainted = self.tainted_numbers
        cdef Chars t = chars_of(text)
        cdef Py_ssize_t n = len(text), i = 0, k
        while True:
            k = next_number(t, n, &i)
            if k < 0:
                return False
            if number_value(t, text, i, k, False) in tainted:
                return True
            i = k

    cdef void _taint(self, value) except *:
        self.tainted.add(value)
        number = value if type(value) is int else _as_plain(value)
        if number is not None:
            self.tainted_numbers.add(number)

    cdef void _untaint(self, list values) except *:
        self.tainted.difference_update(values)
        for value in values:
            number = _as_plain(value)
            if number is not None:
                self.tainted_numbers.discard(number)

    cdef list _claims(self, list links, Py_ssize_t base):
        cdef list found = []
        cdef list sides = []  # of the chain `a = b = c` the link belongs to
        cdef Py_ssize_t previous_end = -1, start, left_start, right_end
        cdef tuple link
        cdef bint chained
        cdef str label
        for item in links:
            # A Link (a tuple subclass, which a typed loop variable would refuse):
            # (left_start, left_end, right_start, right_end, left_text, right_text,
            # left_value, right_value, holds, trivial, approximate).
            link = <tuple> item
            left_start, right_end = link[0], link[3]
            chained = left_start < previous_end
            start = previous_end if chained else left_start
            previous_end = right_end
            if not chained:
                sides = [link[4]]
            if not link[9]:
                label = self._judge_link(link, sides)
                found.append(
                    new_tuple(Finding, (base + start, base + right_end, label, CONFIDENCES[label]))
                )
            sides.append(link[5])
        return found

    cdef str _judge_link(self, tuple link, list sides):
        # link[4] left_text, [5] right_text, [6] left_value, [7] right_value, [8] holds
        cdef str left_text = link[4], right_text = link[5]
        left_value, right_value = link[6], link[7]
        cdef bint dependent
        cdef list checked
        if not link[8]:
            dependent = (
                right_value in self.tainted
                or self._uses_tainted(left_text)
                or self._uses_tainted(right_text)
            )
            self._taint(right_value)
            if dependent:
                return UNSUPPORTED
            self.errors.setdefault(left_value, []).append(right_value)
            return INVALID
        repaired = self.errors.pop(left_value, None)
        if repaired:
            self._untaint(repaired)
            self._establish((normal(left_text), right_value), sides, right_text)
            return VERIFIED_CORRECTION
        if self._uses_tainted(left_text):
            self._taint(right_value)
            return UNSUPPORTED
        # The claim's spelling only now: most true claims of a trace with an error left
        # standing build on its value (above), and never ask.
        claim = (normal(left_text), right_value)
        if claim in self.claims:
            return UNPRODUCTIVE_REPETITION
        checked = self._establish(claim, sides, right_text)
        if checked and min(checked) > 0:
            return UNPRODUCTIVE_REPETITION
        return VALID_PROGRESS

    cdef list _establish(self, tuple claim, list sides, str right):
        self.claims.add(claim)
        cdef list checked = []
        cdef dict seen = {}
        cdef str side
        for side in sides:
            seen[relation(side, right)] = None
        for key in seen:
            count = self.rechecks.get(key)
            self.rechecks[key] = 0 if count is None else count + 1
            if count is not None:
                checked.append(count)
        return checked
