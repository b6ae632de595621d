"""Exact equality of two sympy numbers (rationals and radicals), always fast.

sympy's ``equals`` can take minutes on crafted radical expressions, so equality is
settled with a root-separation bound instead (Burnikel et al., 2000): if the
difference is not zero, its magnitude is at least 2**-need, so evaluating both
sides to better than that decides it; when `need` is too large, the answer is
None (not checkable) rather than a guess.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

from judge_service.lazy_sympy import sympy

_MAX_DEGREE, _MAX_PROOF_BITS = 4096, 12_000  # a proof takes tens of milliseconds at most


def exact_equal(a: Any, b: Any) -> bool | None:
    if a.is_Rational and b.is_Rational:
        return bool(a == b)
    d = a - b
    if d.is_Rational:
        return bool(d == 0)
    from sympy.core.evalf import PrecisionExhausted  # a, b are sympy's: it is loaded

    with contextlib.suppress(PrecisionExhausted):  # a clear mismatch settles most claims
        an, bn = a.evalf(30, strict=True), b.evalf(30, strict=True)
        if abs(an - bn) > max(abs(an), abs(bn)) * sympy.Rational(1, 10**20):
            return False
    # Agreeing to 20 digits. sympy's `equals` can take minutes on crafted radicals, so
    # decide with a separation bound instead: if d != 0 then |d| >= 2**-need, and
    # evaluating both sides to better than that settles it (or gives up: None).
    bound = _separation(d)
    if bound is None or bound[2] > _MAX_DEGREE:
        return None
    log_u, log_l, degree = bound
    need = math.ceil((degree - 1) * log_u + log_l) + 3
    if need > _MAX_PROOF_BITS:
        return None
    n = a.evalf(15)  # |a| < 2**(exponent + bit count) of this mpf; no float overflow
    size = max(0, int(n._mpf_[2]) + int(n._mpf_[3])) if n.is_Float else 0
    digits = math.ceil((need + 3 + size) * math.log10(2)) + 10
    try:
        an, bn = (x.evalf(digits, strict=True, maxn=2 * digits) for x in (a, b))
    except PrecisionExhausted:
        return None
    return bool(abs(an - bn) < sympy.Rational(1, 2 ** (need - 1)))


def _separation(e: Any) -> tuple[float, float, int] | None:
    """(log2 u, log2 l, D) for e = N/M, N and M division-free: |conjugates of N| <= u,
    |M| <= l, degree <= D. Then e != 0 implies |e| >= 1 / (u**(D-1) * l), since N's
    norm is a nonzero integer (the BFMSS bound, Burnikel et al. 2000)."""
    if e.is_Rational:
        return math.log2(max(abs(int(e.p)), 1)), math.log2(int(e.q)), 1
    if e.is_Add or e.is_Mul:
        parts = [x for x in map(_separation, e.args) if x is not None]
        if len(parts) != len(e.args):
            return None
        log_u, log_l, degree = parts[0]
        for u2, l2, d2 in parts[1:]:
            log_u = max(log_u + l2, log_l + u2) + 1 if e.is_Add else log_u + u2
            log_l, degree = log_l + l2, degree * d2
        return log_u, log_l, degree
    if e.is_Pow and e.exp.is_Rational and (base := _separation(e.base)) is not None:
        p, q = int(e.exp.p), int(e.exp.q)
        log_u, log_l = (base[0], base[1]) if p > 0 else (base[1], base[0])
        log_u, log_l = abs(p) * log_u, abs(p) * log_l
        # q-th root of N/M written as root(N * M**(q-1)) / M: one new radical, not two.
        return (log_u + (q - 1) * log_l) / q, log_l, base[2] * q
    return None
