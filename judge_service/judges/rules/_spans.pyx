# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""`rules_judge.python_disjoint_spans`, compiled. `tests/test_rules_scan.py` holds the
two equal; setup.py builds this module where it can."""

from cpython cimport array
from libc.string cimport memmove

import array

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
    if len(lasts) != n:  # read below without bounds checks
        raise ValueError(f"{n} starts but {len(lasts)} ends")
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
