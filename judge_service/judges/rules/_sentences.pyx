# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The rules judge's sentence loops, compiled: a char loop each, where the definitions
call the regex engine once per line or sentence and handle every piece in Python.
`sentences` and `line_sentences` equal `rules_judge.python_sentences` and
`python_line_sentences` (the sentences' words for the near-duplicate check are read by
_words.pyx).

`tests/test_rules_scan.py` holds each equal to its definition; setup.py builds this
module where it can.
"""

from cpython.unicode cimport Py_UNICODE_ISSPACE
from libc.stdint cimport uint8_t, uint16_t, uint32_t

from judge_service.judges.rules._chars cimport Chars, char_at, chars_of


ctypedef fused code_unit:  # a str's storage: one, two or four bytes a char
    uint8_t
    uint16_t
    uint32_t


cdef inline Py_ssize_t separator(
    const code_unit *data, Py_ssize_t i, Py_ssize_t n, Py_UCS4 previous
) noexcept:
    """The first j >= i whose char is white space and follows ``. ! ? 。`` (`previous`:
    the char before i, 0 for none), else n; one loop per storage kind (a char read
    through the kind's switch cost more than the test)."""
    cdef Py_UCS4 c
    while i < n:
        c = data[i]
        # The end mark first: most chars follow none, and the space test is then skipped.
        if (
            previous == 46 or previous == 33 or previous == 63 or previous == 0x3002
        ) and Py_UNICODE_ISSPACE(c):
            return i
        previous = c
        i += 1
    return n


def sentences(str line):
    """A line's sentences as (start, end, text), surrounding whitespace excluded: the
    pieces between separators (a whitespace run after ``. ! ? 。``), stripped, empty ones
    dropped (`rules_judge.python_sentences`)."""
    return sentences_in(line, chars_of(line), 0, len(line))


cdef list sentences_in(str text, Chars chars, Py_ssize_t start, Py_ssize_t n):
    """`sentences` of the line ``text[start:n]``, read in place (offsets relative to it):
    the line is not copied out first."""
    cdef Py_ssize_t i = start, piece = start, a, b
    cdef list out = []
    cdef Py_UCS4 previous = 0  # the line's own start: no end mark before it
    while True:
        # The next separator from i: a whitespace run whose first char follows an end.
        if chars.kind == 1:
            i = separator(<const uint8_t *>chars.data, i, n, previous)
        elif chars.kind == 2:
            i = separator(<const uint16_t *>chars.data, i, n, previous)
        else:
            i = separator(<const uint32_t *>chars.data, i, n, previous)
        a, b = piece, i
        while a < b and Py_UNICODE_ISSPACE(char_at(chars, a)):
            a += 1
        while b > a and Py_UNICODE_ISSPACE(char_at(chars, b - 1)):
            b -= 1
        if b > a:
            out.append((a - start, b - start, text[a:b]))
        if i >= n:
            return out
        while i < n and Py_UNICODE_ISSPACE(char_at(chars, i)):
            i += 1
        piece = i
        previous = 0


def line_sentences(str text):
    """(line number, where it starts, `sentences` of it) of every line that is not blank
    (`rules_judge.python_line_sentences`)."""
    cdef Chars ctext = chars_of(text)
    cdef list out = []
    cdef Py_ssize_t n = len(text), start = 0, end, stop, k, number = 0
    cdef bint blank
    while True:
        end = text.find("\n", start)
        if end < 0:
            end = n
        stop = end
        while stop > start and char_at(ctext, stop - 1) == 13:  # "\r"
            stop -= 1
        blank = True
        k = start
        while k < stop:
            if not Py_UNICODE_ISSPACE(char_at(ctext, k)):
                blank = False
                break
            k += 1
        if not blank:
            out.append((number, start, sentences_in(text, ctext, start, stop)))
        if end >= n:
            return out
        start = end + 1
        number += 1
