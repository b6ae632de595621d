# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""`rules_judge.python_disjoint_spans`, compiled (as lists, and as columns: `disjoint_ranges`).
`tests/test_rules_scan.py` holds them equal; setup.py builds this module where it can."""

from cpython cimport array
from libc.stdint cimport int64_t
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


cdef Py_ssize_t by_insertion(
    const long long *firsts, const long long *lasts, Py_ssize_t n,
    long long *oi, long long *os, long long *oe,
) except -1:
    """The definition's walk: the taken ranges kept in two C arrays by start (an insertion
    moves those after it: the square of n at worst, for ranges over any span of ints)."""
    cdef array.array starts = array.array("q", [0]) * max(n, 1)
    cdef array.array ends = array.array("q", [0]) * max(n, 1)
    cdef long long *s = starts.data.as_longlongs
    cdef long long *e = ends.data.as_longlongs
    cdef Py_ssize_t taken = 0, index, at, lo
    cdef long long start, end
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
        oi[taken], os[taken], oe[taken] = index, start, end
        taken += 1
    return taken


cdef Py_ssize_t by_tokens(
    const long long *firsts, const long long *lasts, Py_ssize_t n, long long low, long long high,
    long long *oi, long long *os, long long *oe,
) except -1:
    """The same cuts over the positions low..high themselves, linear in n and their
    number: a start inside taken ranges moves to the first free position after it (each
    taken position points past itself, paths halved as they are followed); an end stops at
    the first taken position after the start. Every position is taken once."""
    cdef Py_ssize_t size = high - low + 1, index, taken = 0
    cdef long long start, end, t, up
    cdef array.array next_free = array.array("q", [0]) * size
    cdef long long *free = next_free.data.as_longlongs  # free[t] == t: position low + t free
    for t in range(size):
        free[t] = t
    for index in range(n):
        start, end = firsts[index] - low, lasts[index] - low
        if start >= end:
            continue
        t = start
        while free[t] != t:
            up = free[free[t]]
            free[t] = up
            t = up
        start = t
        if start >= end:
            continue
        t = start
        while t < end and free[t] == t:
            free[t] = t + 1
            t += 1
        oi[taken], os[taken], oe[taken] = index, start + low, t + low
        taken += 1
    return taken


cdef Py_ssize_t cut(
    const long long *firsts, const long long *lasts, Py_ssize_t n,
    long long *oi, long long *os, long long *oe,
) except -1:
    """`python_disjoint_spans`' ranges into oi, os, oe (their number returned): over the
    positions when the nonempty ranges span a few per range (token indices), else as the
    definition walks."""
    cdef Py_ssize_t index
    cdef long long low = 0, high = -1
    for index in range(n):
        if firsts[index] < lasts[index]:
            if high < low:
                low, high = firsts[index], lasts[index]
            else:
                low = min(low, firsts[index])
                high = max(high, lasts[index])
    if high < low:
        return 0
    if high - low <= 64 * n + 65536:
        return by_tokens(firsts, lasts, n, low, high, oi, os, oe)
    return by_insertion(firsts, lasts, n, oi, os, oe)


def disjoint_spans(list firsts, list lasts):
    """`rules_judge.python_disjoint_spans` (`cut`)."""
    cdef Py_ssize_t n = len(firsts), taken, k
    if len(lasts) != n:
        raise ValueError(f"{n} starts but {len(lasts)} ends")
    cdef array.array f = array.array("q", firsts)
    cdef array.array l = array.array("q", lasts)
    cdef array.array out = array.array("q", [0]) * max(3 * n, 1)
    cdef long long *o = out.data.as_longlongs
    taken = cut(
        f.data.as_longlongs, l.data.as_longlongs, n,
        o, o + n, o + 2 * n,
    )
    return [(o[k], o[n + k], o[2 * n + k]) for k in range(taken)]


def disjoint_ranges(const int64_t[::1] firsts, const int64_t[::1] lasts):
    """`disjoint_spans` of two int64 arrays, as three array('q') columns (index, start,
    end) rather than a tuple per range: thousands of ranges a long trace, and the rules
    judge keeps them as columns (`rules_judge.to_token_spans`)."""
    cdef Py_ssize_t n = firsts.shape[0], taken
    if lasts.shape[0] != n:
        raise ValueError(f"{n} starts but {lasts.shape[0]} ends")
    cdef array.array out_index = array.array("q", [0]) * max(n, 1)
    cdef array.array out_start = array.array("q", [0]) * max(n, 1)
    cdef array.array out_end = array.array("q", [0]) * max(n, 1)
    if n:
        taken = cut(
            <const long long *> &firsts[0], <const long long *> &lasts[0], n,
            out_index.data.as_longlongs,
            out_start.data.as_longlongs,
            out_end.data.as_longlongs,
        )
    else:
        taken = 0
    array.resize(out_index, taken)
    array.resize(out_start, taken)
    array.resize(out_end, taken)
    return out_index, out_start, out_end
