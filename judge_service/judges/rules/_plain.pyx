# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""`plain_claims.python_plain_links`, compiled: a plain line's grammar read char by char
(the definition matches it with two regexes, then handles every chain in Python), its
integer sides evaluated in checked 64-bit arithmetic (Python's ints past that).
`tests/test_rules_scan.py` holds the two equal; setup.py builds this module where it can.
"""

from judge_service.judges.rules._chars cimport Chars, char_at, chars_of, is_digit, is_letter

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


cdef inline bint is_sign(Py_UCS4 c) noexcept:
    return c == 45 or c == 43 or c == 0x2212  # - + −


cdef inline bint is_times(Py_UCS4 c) noexcept:
    return c == 42 or c == 0xD7 or c == 0xB7  # * × ·


cdef inline bint is_punct(Py_UCS4 c) noexcept:
    return c == 46 or c == 44 or c == 59  # . , ;


cdef inline Py_ssize_t number_end(str line, Py_ssize_t i, Py_ssize_t n) noexcept:
    """The end of `_NUMBER` (``0|[1-9][0-9]{0,8}``) at i, or -1."""
    cdef Chars cline = chars_of(line)
    if i >= n or not is_digit(char_at(cline, i)):
        return -1
    if char_at(cline, i) == 48:  # "0"
        return i + 1
    cdef Py_ssize_t j = i + 1
    while j < n and j - i < 9 and is_digit(char_at(cline, j)):
        j += 1
    return j


cdef inline Py_ssize_t expression_end(str line, Py_ssize_t i, Py_ssize_t n) noexcept:
    """The end of the longest `_EXPRESSION` at i, or -1."""
    cdef Chars cline = chars_of(line)
    if i < n and is_sign(char_at(cline, i)):
        i += 1
    cdef Py_ssize_t j = number_end(line, i, n)
    cdef Py_ssize_t k
    if j < 0:
        return -1
    while j + 3 < n and char_at(cline, j) == 32 and char_at(cline, j + 2) == 32:
        if not (is_sign(char_at(cline, j + 1)) or is_times(char_at(cline, j + 1))):
            break
        k = number_end(line, j + 3, n)
        if k < 0:
            break
        j = k
    return j


cdef inline long long digits(str line, Py_ssize_t i, Py_ssize_t j) noexcept:
    cdef Chars cline = chars_of(line)
    cdef long long v = 0
    while i < j:
        v = v * 10 + (<long long>char_at(cline, i) - 48)
        i += 1
    return v


cdef object side_value(str line, Py_ssize_t i, Py_ssize_t j, int *ops):
    """(value, operations) of the expression line[i:j], as `plain_claims._value` gives
    them: products before sums, left to right; checked C arithmetic, and Python's ints
    past 64 bits."""
    cdef Chars cline = chars_of(line)
    cdef bint negative = False
    cdef Py_ssize_t k, m, first = i
    cdef long long total = 0, term, operand, sign = 1, signed_term = 0
    cdef bint overflow = False
    cdef Py_UCS4 op
    if is_sign(char_at(cline, i)):
        negative = char_at(cline, i) != 43
        i += 1
    k = number_end(line, i, j)
    term = digits(line, i, k)
    if negative:
        term = -term
    ops[0] = 0
    while k < j:
        op = char_at(cline, k + 1)
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
    cdef Chars cline = chars_of(line)
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
        c = char_at(cline, i)
        if is_letter(c):
            j = i + 1
            while j < n and is_letter(char_at(cline, j)):
                j += 1
            if j < n and is_punct(char_at(cline, j)):
                before_word, before_punct = None, char_at(cline, j)
                j += 1
            else:
                before_word, before_punct = line[i:j], None
        else:
            e = expression_end(line, i, n)
            if e < 0:
                return None
            sides = 1
            while e + 3 < n and char_at(cline, e) == 32 and char_at(cline, e + 1) == 61 \
                    and char_at(cline, e + 2) == 32:  # " = "
                t = expression_end(line, e + 3, n)
                if t < 0:
                    break
                e = t
                sides += 1
            if sides < 2:
                return None
            j = e
            after = None
            if j < n and is_punct(char_at(cline, j)):
                j += 1
            elif j + 1 < n and char_at(cline, j) == 32 and is_letter(char_at(cline, j + 1)):
                t = j + 1
                while t < n and is_letter(char_at(cline, t)):
                    t += 1
                after = line[j + 1 : t]
            else:
                t = j
                while t < n and char_at(cline, t) == 32:
                    t += 1
                if t < n:
                    return None
            chains.append(
                (i, e, None if first else before_word, None if first else before_punct, after)
            )
            if j > e:
                before_word, before_punct = None, char_at(cline, e)
            else:
                before_word, before_punct = None, None  # only a word can follow: its own
        first = False
        # Between items: one space, or spaces to the end.
        if j >= n:
            break
        if char_at(cline, j) != 32:
            return None
        t = j
        while t < n and char_at(cline, t) == 32:
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
    cdef Chars cline = chars_of(line)
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
        lops > 0 and (punct == "," or punct == ";" or is_digit(char_at(cline, start)))
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
                    (position, le, rs, re_, lt, rt, lv, rv, lv == rv,
                     lops == 0 and rops == 0, False),
                )
            )
        usable = True
        position, le, lt, lv, lops = rs, re_, rt, rv, rops
    return True
