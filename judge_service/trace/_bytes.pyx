# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The byte-level decode's gather, compiled: the bytes of each id's piece, one after
another, copied from the table's one array (`detokenize.LoadedTokenizer._joined` is the
definition, in numpy array steps, for an install without a C compiler).
`tests/test_trace.py` holds the two equal; setup.py builds this module where it can."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int64_t, uint8_t
from libc.string cimport memcpy


def gather(
    const int64_t[::1] ids,
    const int64_t[::1] starts,
    const int64_t[::1] lengths,
    const uint8_t[::1] blob,
):
    """``blob[starts[i] : starts[i] + lengths[i]]`` for each i of `ids`, joined. An id
    outside the table is an IndexError (the caller checked them: this is no trust)."""
    cdef Py_ssize_t k, n = ids.shape[0], table = starts.shape[0], total = 0, at = 0
    cdef int64_t i
    if lengths.shape[0] != table:
        raise ValueError("starts and lengths of two sizes")
    for k in range(n):
        i = ids[k]
        if i < 0 or i >= table or starts[i] < 0 or starts[i] + lengths[i] > blob.shape[0]:
            raise IndexError(f"id {i} is not in the byte table")
        total += lengths[i]
    out = PyBytes_FromStringAndSize(NULL, total)
    cdef char *dest = PyBytes_AS_STRING(out)
    for k in range(n):
        i = ids[k]
        if lengths[i]:
            memcpy(dest + at, &blob[starts[i]], lengths[i])
            at += lengths[i]
    return out
