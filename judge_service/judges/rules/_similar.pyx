# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""`repetition.python_similar_units`, compiled: which units share enough word trigrams with
an earlier one, counted one unit at a time against an index of the earlier ones.

The definition sorts every (trigram, unit) entry, then expands and counts every pair of
units that meet through a trigram (numpy: a sort, a repeat and a unique over up to tens of
millions of pairs, in chunks). Here each distinct trigram gets an id from one hash table;
a unit then adds one to each earlier unit it meets through one of its trigrams (a
trigram's first `max_postings` holders, as the definition keeps them) and compares those
it met: the same pairs, the same counts, no pair array. `tests/test_rules_repetition.py`
holds the two equal.
"""

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.string cimport memset


cdef inline uint64_t mix(int64_t a, int64_t b, int64_t c) noexcept:
    # Three word ids to 64 bits: multiply-xorshift rounds (splitmix64's finaliser).
    cdef uint64_t h = <uint64_t>a * 0x9E3779B97F4A7C15ULL
    h = (h ^ (h >> 29) ^ <uint64_t>b) * 0xBF58476D1CE4E5B9ULL
    h = (h ^ (h >> 31) ^ <uint64_t>c) * 0x94D049BB133111EBULL
    return h ^ (h >> 32)


cdef void *grab(Py_ssize_t n) except NULL:
    cdef void *p = PyMem_Malloc(n if n > 0 else 1)
    if p == NULL:
        raise MemoryError()
    return p


def similar_units(
    const int64_t[::1] ids,
    list lengths,
    double threshold,
    Py_ssize_t max_postings,
    Py_ssize_t probes_per_lookup,
    Py_ssize_t base_probes,
):
    """The units (`lengths[u]` word ids each, one unit after another in `ids`) whose
    trigram set is similar enough to an earlier unit's, in order; None past the trigram
    table's probe budget (`base_probes` slots visited plus `probes_per_lookup` a trigram:
    ids crafted to share its hash bits would make probing quadratic), when the caller
    runs the definition."""
    cdef Py_ssize_t units = len(lengths), u, k, p, q, end, total = 0, trigrams = 0
    cdef Py_ssize_t capacity = 16, mask, slot, tid, distinct = 0, e, s, at
    cdef Py_ssize_t probes = 0, budget = base_probes
    cdef int64_t a, b, c
    cdef uint64_t h
    for u in range(units):
        k = lengths[u]
        total += k
        if k >= 3:
            trigrams += k - 2
    if total > ids.shape[0]:
        raise ValueError("the lengths count more ids than there are")
    while capacity < 2 * trigrams:
        capacity *= 2
    mask = capacity - 1
    # Per unit: its length, trigram-set size, count shared with the unit read now, and
    # the units that one met. Per trigram id: its words, hash, last unit seen, holders
    # kept and where they lie. Per trigram position: its id, or -1 for a repeat within
    # its unit.
    cdef Py_ssize_t *length = NULL
    cdef Py_ssize_t *met = NULL
    cdef int32_t *size = NULL
    cdef int32_t *shared = NULL
    cdef Py_ssize_t *slots = NULL
    cdef int64_t *words = NULL
    cdef uint64_t *hashes = NULL
    cdef Py_ssize_t *last = NULL
    cdef Py_ssize_t *kept = NULL
    cdef Py_ssize_t *first = NULL
    cdef Py_ssize_t *filled = NULL
    cdef Py_ssize_t *of = NULL
    cdef Py_ssize_t *postings = NULL
    cdef list out = []
    cdef bint similar
    try:
        length = <Py_ssize_t *>grab(units * sizeof(Py_ssize_t))
        met = <Py_ssize_t *>grab(units * sizeof(Py_ssize_t))
        size = <int32_t *>grab(units * sizeof(int32_t))
        shared = <int32_t *>grab(units * sizeof(int32_t))
        slots = <Py_ssize_t *>grab(capacity * sizeof(Py_ssize_t))
        words = <int64_t *>grab(3 * trigrams * sizeof(int64_t))
        hashes = <uint64_t *>grab(trigrams * sizeof(uint64_t))
        last = <Py_ssize_t *>grab(trigrams * sizeof(Py_ssize_t))
        kept = <Py_ssize_t *>grab(trigrams * sizeof(Py_ssize_t))
        first = <Py_ssize_t *>grab(trigrams * sizeof(Py_ssize_t))
        filled = <Py_ssize_t *>grab(trigrams * sizeof(Py_ssize_t))
        of = <Py_ssize_t *>grab(trigrams * sizeof(Py_ssize_t))
        for u in range(units):
            length[u] = lengths[u]
        memset(slots, 0xFF, capacity * sizeof(Py_ssize_t))  # -1: empty
        memset(size, 0, units * sizeof(int32_t))
        memset(shared, 0, units * sizeof(int32_t))
        # 1. An id for each distinct trigram; each unit's trigram set; holders to keep.
        at, q = 0, 0
        for u in range(units):
            end = at + length[u]
            for p in range(at, end - 2):
                a, b, c = ids[p], ids[p + 1], ids[p + 2]
                h = mix(a, b, c)
                slot = <Py_ssize_t>(h & <uint64_t>mask)
                budget += probes_per_lookup
                while True:
                    probes += 1
                    if probes > budget:
                        return None
                    tid = slots[slot]
                    if tid < 0:
                        tid = distinct
                        distinct += 1
                        slots[slot] = tid
                        words[3 * tid], words[3 * tid + 1], words[3 * tid + 2] = a, b, c
                        hashes[tid] = h
                        last[tid] = -1
                        kept[tid] = 0
                        break
                    if (hashes[tid] == h and words[3 * tid] == a and words[3 * tid + 1] == b
                            and words[3 * tid + 2] == c):
                        break
                    slot = (slot + 1) & mask
                if last[tid] == u:
                    of[q] = -1  # a set: a trigram counts once per unit
                else:
                    of[q] = tid
                    last[tid] = u
                    size[u] += 1
                    if kept[tid] < max_postings:
                        kept[tid] += 1
                q += 1
            at = end
        s = 0
        for tid in range(distinct):
            first[tid] = s
            filled[tid] = 0
            s += kept[tid]
        postings = <Py_ssize_t *>grab(s * sizeof(Py_ssize_t))
        # 2. Each unit meets the earlier holders its trigrams kept, then joins them.
        at, q = 0, 0
        for u in range(units):
            end = at + length[u]
            k = 0  # units met
            for p in range(at, end - 2):
                tid = of[q]
                q += 1
                if tid < 0:
                    continue
                for s in range(first[tid], first[tid] + filled[tid]):
                    e = postings[s]
                    if shared[e] == 0:
                        met[k] = e
                        k += 1
                    shared[e] += 1
                if filled[tid] < kept[tid]:
                    postings[first[tid] + filled[tid]] = u
                    filled[tid] += 1
            similar = False
            for s in range(k):
                e = met[s]
                if not similar and (
                    <double>shared[e] / <double>(size[u] + size[e] - shared[e]) >= threshold
                ):
                    similar = True
                shared[e] = 0
            if similar:
                out.append(u)
            at = end
        return out
    finally:
        PyMem_Free(length)
        PyMem_Free(slots)
        PyMem_Free(words)
        PyMem_Free(hashes)
        PyMem_Free(last)
        PyMem_Free(kept)
        PyMem_Free(first)
        PyMem_Free(filled)
        PyMem_Free(of)
        PyMem_Free(postings)
        PyMem_Free(size)
        PyMem_Free(shared)
        PyMem_Free(met)
