# cython: language_level=3, boundscheck=False, wraparound=False
"""`reader.PythonReader`, compiled: the same walk over a trace's lines with the same state,
its per-claim work in C calls rather than bytecode, and two of the definition's regex and
string passes (`python_numbers`, `python_normal`) as one char pass each.
`tests/test_rules_reader.py` holds the two readers equal; setup.py builds this module
where it can.
"""

from fractions import Fraction

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
from judge_service.judges.rules.reader import (
    _CORRECTION_WORDS,
    CONFIDENCE,
    FALSE,
    TAINTED,
    TRUE,
    Finding,
    _as_plain,
    _magnitude,
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
    cdef list kinds = read.kinds, lows = read.lows, highs = read.highs
    cdef Py_ssize_t stop = len(findings)
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
            kinds.append(LINK_FALSE)
        elif finding[2] == UNSUPPORTED:
            kinds.append(LINK_TAINTED)
        else:
            kinds.append(LINK_TRUE)
        lows.append(base + <Py_ssize_t> link[0])  # left_start
        highs.append(base + <Py_ssize_t> link[3])  # right_end


cdef inline bint is_word(Py_UCS4 c) noexcept:
    # The regex module's \w for str patterns: alphanumeric by Unicode, or "_".
    return c == 95 or Py_UNICODE_ISALNUM(c)


cpdef list numbers(str text):
    """`reader.python_numbers`: each match of ``(?<![\\w.])-?\\d+(?:\\.\\d+)?(?![\\w]|\\.\\d)``
    in order. A greedy match that fails the lookahead has no shorter one that passes (a
    shorter digit run is followed by a digit, a dropped decimal part by ".digit"), so one
    forward pass decides each start."""
    cdef Chars t = chars_of(text)
    cdef Py_ssize_t n = len(text)
    cdef Py_ssize_t i = 0, j, k
    cdef Py_UCS4 c
    cdef list out = []
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
        out.append(text[i:k])
        i = k
    return out


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


cdef tuple relation(str side, str right):
    """`reader._relation(side, right)`."""
    cdef list found = numbers(side)
    found.extend(numbers(right))
    cdef list values
    if "." in side or "." in right:
        values = [_magnitude(number) for number in found]
    else:
        values = [abs(int(number)) for number in found]
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
        cdef str number
        for number in numbers(text):
            if plain_number(number) in self.tainted_numbers:
                return True
        return False

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
        claim = (normal(left_text), right_value)
        repaired = self.errors.pop(left_value, None)
        if repaired:
            self._untaint(repaired)
            self._establish(claim, sides, right_text)
            return VERIFIED_CORRECTION
        if self._uses_tainted(left_text):
            self._taint(right_value)
            return UNSUPPORTED
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
