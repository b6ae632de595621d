# What the compiled scanners (_plain.pyx, _sentences.pyx) share: a str's storage, read
# without a call or a bounds check per char, and ASCII letters and digits.
from cpython.unicode cimport PyUnicode_DATA, PyUnicode_KIND, PyUnicode_READ


cdef struct Chars:
    int kind
    void *data


cdef inline Chars chars_of(str s) noexcept:
    cdef Chars chars
    chars.kind = PyUnicode_KIND(s)
    chars.data = PyUnicode_DATA(s)
    return chars


cdef inline Py_UCS4 char_at(Chars chars, Py_ssize_t i) noexcept:
    return PyUnicode_READ(chars.kind, chars.data, i)


cdef inline bint is_letter(Py_UCS4 c) noexcept:
    return (c >= 97 and c <= 122) or (c >= 65 and c <= 90)


cdef inline bint is_digit(Py_UCS4 c) noexcept:
    return c >= 48 and c <= 57
