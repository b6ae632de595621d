# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The near-duplicate check's words, compiled: `sentence_units` equals
`repetition.python_sentence_units` (each sentence's words by `repetition.normalise`'s
rule, looked up without a str per word; the exact repeats; the units left to compare).

`tests/test_rules_scan.py` holds it equal to its definition; setup.py builds this module
where it can.
"""

from cpython cimport array
from cpython.unicode cimport Py_UNICODE_ISALNUM
from libc.stdint cimport uint64_t

from judge_service.judges.rules._chars cimport Chars, char_at, chars_of, is_digit, is_letter

import array


cdef inline bint word_char(Py_UCS4 c) noexcept:
    if c < 128:
        return is_letter(c) or is_digit(c)
    return Py_UNICODE_ISALNUM(c)


cdef inline bint connector(Py_UCS4 c) noexcept:
    # . , / ^ * + = × ·
    return (c == 46 or c == 44 or c == 47 or c == 94 or c == 42 or c == 43 or c == 61
            or c == 0xD7 or c == 0xB7)


cdef inline Py_UCS4 lower_ascii(Py_UCS4 c) noexcept:
    # Through an integer: Cython would make `c + 32` a str concatenation.
    cdef unsigned int code = c
    return <Py_UCS4>(code + 32 if 65 <= code <= 90 else code)


cdef inline uint64_t hash_chars(str s, Py_ssize_t i, Py_ssize_t n, bint lower) noexcept:
    """FNV-1a over the code points of s[i:i+n] (ASCII-lowered when `lower`)."""
    cdef Chars cs = chars_of(s)
    cdef uint64_t h = 14695981039346656037ULL
    cdef Py_ssize_t t
    cdef Py_UCS4 c
    for t in range(i, i + n):
        c = lower_ascii(char_at(cs, t)) if lower else char_at(cs, t)
        h = (h ^ <uint64_t>c) * 1099511628211ULL
    return h


cdef class Vocabulary:
    """Word -> id by first appearance, without a str per word: an open-addressing table
    of ids and, per id, where its chars lie (a kept str, start, length, and whether they
    are read ASCII-lowered). A word is compared by its code points, whatever the str's
    storage kind, so "key" and "\u212aey".lower() are one word, as in a dict."""

    cdef list keep  # the strs the ids' chars lie in (alive while their data is read)
    cdef array.array kinds, datas, start, length, lower, hashes, slots
    cdef Py_ssize_t mask, size
    # Slots visited, against a budget per lookup: words crafted to share hash bits would
    # make linear probing quadratic (the hash is FNV-1a, not a keyed hash as dict's).
    cdef Py_ssize_t probes, budget, per_lookup

    def __cinit__(self, Py_ssize_t per_lookup, Py_ssize_t base):
        self.probes = 0
        self.per_lookup = per_lookup
        self.budget = base
        self.keep = []
        self.kinds = array.array("q")
        self.datas = array.array("Q")  # each kept str's data pointer
        self.start = array.array("q")
        self.length = array.array("q")
        self.lower = array.array("q")
        self.hashes = array.array("Q")
        self.slots = array.array("q", [-1]) * 64  # doubled as it fills: most traces are short
        self.mask = 63
        self.size = 0

    cdef inline bint same(
        self, Py_ssize_t word, Chars cs, Py_ssize_t i, Py_ssize_t n, bint lower
    ) noexcept:
        if self.length.data.as_longlongs[word] != n:
            return False
        cdef Chars ckept
        ckept.kind = <int>self.kinds.data.as_longlongs[word]
        ckept.data = <void *><size_t>self.datas.data.as_ulonglongs[word]
        cdef Py_ssize_t at = self.start.data.as_longlongs[word], t
        cdef bint kept_lower = self.lower.data.as_longlongs[word]
        cdef Py_UCS4 a, b
        cdef const unsigned char *pa
        cdef const unsigned char *pb
        if ckept.kind == 1 and cs.kind == 1:  # most words: one byte a char, read directly
            pa = <const unsigned char *>ckept.data + at
            pb = <const unsigned char *>cs.data + i
            for t in range(n):
                a = lower_ascii(pa[t]) if kept_lower else pa[t]
                b = lower_ascii(pb[t]) if lower else pb[t]
                if a != b:
                    return False
            return True
        for t in range(n):
            a = lower_ascii(char_at(ckept, at + t)) if kept_lower else char_at(ckept, at + t)
            b = lower_ascii(char_at(cs, i + t)) if lower else char_at(cs, i + t)
            if a != b:
                return False
        return True

    cdef Py_ssize_t find(
        self, uint64_t h, Chars cs, Py_ssize_t i, Py_ssize_t n, bint lower
    ) except -2:
        """The word's id, or -1; _Crowded past the probe budget."""
        cdef Py_ssize_t slot = <Py_ssize_t>(h & <uint64_t>self.mask), word
        self.budget += self.per_lookup
        while True:
            self.probes += 1
            if self.probes > self.budget:
                raise _Crowded()
            word = self.slots.data.as_longlongs[slot]
            if word < 0:
                return -1
            if self.hashes.data.as_ulonglongs[word] == h and self.same(word, cs, i, n, lower):
                return word
            slot = (slot + 1) & self.mask

    cdef int step(self) except -1:
        self.probes += 1
        if self.probes > self.budget:
            raise _Crowded()
        return 0

    cdef Py_ssize_t add(
        self, uint64_t h, str s, Py_ssize_t i, Py_ssize_t n, bint lower
    ) except -1:
        """A new id for a word `find` did not find."""
        cdef Py_ssize_t word = self.size, slot
        cdef Chars cs = chars_of(s)
        self.keep.append(s)
        self.kinds.append(cs.kind)
        self.datas.append(<size_t>cs.data)
        self.start.append(i)
        self.length.append(n)
        self.lower.append(lower)
        self.hashes.append(h)
        self.size += 1
        if 2 * self.size > self.mask:
            self.grow()
        else:
            slot = <Py_ssize_t>(h & <uint64_t>self.mask)
            while self.slots.data.as_longlongs[slot] >= 0:
                self.step()
                slot = (slot + 1) & self.mask
            self.slots.data.as_longlongs[slot] = word
        return word

    cdef int grow(self) except -1:
        cdef Py_ssize_t word, slot
        self.slots = array.array("q", [-1]) * (2 * (self.mask + 1))
        self.mask = 2 * self.mask + 1
        for word in range(self.size):
            slot = <Py_ssize_t>(self.hashes.data.as_ulonglongs[word] & <uint64_t>self.mask)
            while self.slots.data.as_longlongs[slot] >= 0:
                self.step()
                slot = (slot + 1) & self.mask
            self.slots.data.as_longlongs[slot] = word
        return 0


class _Crowded(Exception):
    """A table's probes passed their budget (never leaves this module)."""


def sentence_units(
    sentences,
    Py_ssize_t min_chars,
    Py_ssize_t min_words,
    Py_ssize_t probes_per_lookup,
    Py_ssize_t base_probes,
):
    try:
        return _units(sentences, min_chars, min_words, probes_per_lookup, base_probes)
    except _Crowded:
        return None


cdef tuple _units(
    sentences,
    Py_ssize_t min_chars,
    Py_ssize_t min_words,
    Py_ssize_t probes_per_lookup,
    Py_ssize_t base_probes,
):
    """`repetition.python_sentence_units`: the exact repeats, and the sentences left to
    compare by trigrams with their word ids (int64 bytes), word counts and vocabulary.

    A sentence's words are found by `repetition.normalise`'s rule (a run of
    alphanumerics, or several joined by single connectors) and looked up in a `Vocabulary`
    without making a str of each (only a word beyond ASCII is lowered by `str.lower`); an
    exact repeat is a unit's id sequence again, found through a table of their hashes.
    Both tables share a budget of `base_probes` slots visited plus `probes_per_lookup` per
    word looked up; past it, None (the caller then runs the definition, whose dict has a
    keyed hash). Ordinary text visits ~2 slots a lookup."""
    cdef list repeats = [], units = [], lengths = []
    cdef Vocabulary vocabulary = Vocabulary(probes_per_lookup, base_probes)
    cdef array.array ids = array.array("q")  # every unit's ids, one unit after another
    cdef array.array unit_at = array.array("q")  # where each unit's ids start
    cdef array.array unit_length = array.array("q")  # how many ids it has
    cdef array.array seq_slots = array.array("q", [-1]) * 64
    cdef array.array seq_hashes = array.array("Q")
    cdef Py_ssize_t seq_mask = 63
    # The current sentence's words: where their chars lie (the sentence, or for a word
    # beyond ASCII its lowered str in `texts`: w_text its index there, else -1), start,
    # length, hash.
    cdef list texts = []
    cdef array.array w_start = array.array("q"), w_length = array.array("q")
    cdef array.array w_text = array.array("q"), w_hash = array.array("Q")
    cdef array.array w_id = array.array("q")
    cdef Py_ssize_t k = -1, n, i, j, count, chars, t, word, slot, unit, at, wt, units_n = 0
    cdef bint ascii, known, same
    cdef uint64_t h, sequence
    cdef str s, text
    cdef Py_UCS4 c
    cdef Chars cs, cw
    for s in sentences:
        k += 1
        cs = chars_of(s)
        n = len(s)
        if texts:
            del texts[:]
        count, chars = 0, -1
        i = 0
        while i < n:
            c = char_at(cs, i)
            if not word_char(c):
                i += 1
                continue
            # FNV-1a of the ASCII-lowered chars as they are read (`hash_chars`); a word
            # beyond ASCII is hashed again once lowered.
            ascii = c < 128
            h = (14695981039346656037ULL ^ <uint64_t>lower_ascii(c)) * 1099511628211ULL
            j = i + 1
            while j < n:
                c = char_at(cs, j)
                if word_char(c):
                    ascii = ascii and c < 128
                    h = (h ^ <uint64_t>lower_ascii(c)) * 1099511628211ULL
                    j += 1
                elif connector(c) and j + 1 < n and word_char(char_at(cs, j + 1)):
                    ascii = ascii and c < 128 and char_at(cs, j + 1) < 128
                    h = (h ^ <uint64_t>lower_ascii(c)) * 1099511628211ULL
                    h = (h ^ <uint64_t>lower_ascii(char_at(cs, j + 1))) * 1099511628211ULL
                    j += 2
                else:
                    break
            if count == len(w_start):
                for column in (w_start, w_length, w_text, w_id):
                    (<array.array>column).append(0)
                w_hash.append(0)
            if ascii:
                w_text.data.as_longlongs[count] = -1
                w_start.data.as_longlongs[count] = i
                w_length.data.as_longlongs[count] = j - i
                w_hash.data.as_ulonglongs[count] = h
            else:
                text = s[i:j].lower()
                w_text.data.as_longlongs[count] = len(texts)
                texts.append(text)
                w_start.data.as_longlongs[count] = 0
                w_length.data.as_longlongs[count] = len(text)
                w_hash.data.as_ulonglongs[count] = hash_chars(text, 0, len(text), False)
            chars += w_length.data.as_longlongs[count] + 1
            count += 1
            i = j
        if chars < min_chars or count < min_words:
            continue
        known = True
        sequence = 14695981039346656037ULL
        for t in range(count):
            wt = w_text.data.as_longlongs[t]
            cw = cs if wt < 0 else chars_of(<str>texts[wt])
            word = vocabulary.find(
                w_hash.data.as_ulonglongs[t], cw, w_start.data.as_longlongs[t],
                w_length.data.as_longlongs[t], wt < 0,
            )
            w_id.data.as_longlongs[t] = word
            known = known and word >= 0
            sequence = (sequence ^ <uint64_t>word) * 1099511628211ULL
        if known:  # perhaps a repeat: the same ids as a unit before
            slot = <Py_ssize_t>(sequence & <uint64_t>seq_mask)
            same = False
            while not same:
                vocabulary.step()
                unit = seq_slots.data.as_longlongs[slot]
                if unit < 0:
                    break
                if (seq_hashes.data.as_ulonglongs[unit] == sequence
                        and unit_length.data.as_longlongs[unit] == count):
                    at = unit_at.data.as_longlongs[unit]
                    same = True
                    for t in range(count):
                        if ids.data.as_longlongs[at + t] != w_id.data.as_longlongs[t]:
                            same = False
                            break
                slot = (slot + 1) & seq_mask
            if same:
                repeats.append(k)
                continue
        sequence = 14695981039346656037ULL
        at = len(ids)
        array.resize_smart(ids, at + count)
        for t in range(count):
            word = w_id.data.as_longlongs[t]
            if word < 0:  # new, or new earlier in this sentence
                h = w_hash.data.as_ulonglongs[t]
                wt = w_text.data.as_longlongs[t]
                text = s if wt < 0 else <str>texts[wt]
                cw = chars_of(text)
                word = vocabulary.find(
                    h, cw, w_start.data.as_longlongs[t], w_length.data.as_longlongs[t], wt < 0
                )
                if word < 0:
                    word = vocabulary.add(
                        h, text, w_start.data.as_longlongs[t], w_length.data.as_longlongs[t],
                        wt < 0,
                    )
            ids.data.as_longlongs[at + t] = word
            sequence = (sequence ^ <uint64_t>word) * 1099511628211ULL
        unit = units_n
        units_n += 1
        units.append(k)
        lengths.append(count)
        array.resize_smart(unit_at, units_n)
        array.resize_smart(unit_length, units_n)
        array.resize_smart(seq_hashes, units_n)
        unit_at.data.as_longlongs[unit] = at
        unit_length.data.as_longlongs[unit] = count
        seq_hashes.data.as_ulonglongs[unit] = sequence
        if 2 * (unit + 1) > seq_mask:
            seq_slots = array.array("q", [-1]) * (2 * (seq_mask + 1))
            seq_mask = 2 * seq_mask + 1
            for t in range(unit + 1):
                slot = <Py_ssize_t>(seq_hashes.data.as_ulonglongs[t] & <uint64_t>seq_mask)
                while seq_slots.data.as_longlongs[slot] >= 0:
                    vocabulary.step()
                    slot = (slot + 1) & seq_mask
                seq_slots.data.as_longlongs[slot] = t
        else:
            slot = <Py_ssize_t>(sequence & <uint64_t>seq_mask)
            while seq_slots.data.as_longlongs[slot] >= 0:
                vocabulary.step()
                slot = (slot + 1) & seq_mask
            seq_slots.data.as_longlongs[slot] = unit
    return repeats, units, ids.tobytes(), lengths, vocabulary.size
