"""The weight map shared by CSCR and CoRT: a per-token signal to bounded weights of mean 1.

For the masked tokens (the policy's own), with signal x[t] (larger: more weight)::

    raw[t] = exp((x[t] - max x) / temperature)
    u[t]   = clip(c · raw[t], min_weight, max_weight),  c > 0 chosen so mean_t u = 1
    w[t]   = 1 + strength · (u[t] - 1)

mean(clip(c·raw)) rises continuously from min_weight to max_weight as c grows, so
with min_weight <= 1 <= max_weight one c gives mean 1 exactly (found by bisection
on log c); the strength blend keeps the mean at 1 and the bounds. So w >= 0, w is
bounded, and A_i·w[t] has A_i's sign with Σ_t |A_i·w[t]| = T_masked·|A_i|: the
verifier's sign and the credit budget of the rollout are kept, only moved between
tokens. w = 0 where the mask is 0.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# exp() of anything below this underflows; flooring raw there keeps c finite.
_LOG_FLOOR = -700.0


def bounded_weights(
    signal: FloatArray,
    mask: FloatArray | None,
    *,
    temperature: float,
    min_weight: float,
    max_weight: float,
    strength: float,
) -> FloatArray:
    if not (0.0 <= min_weight <= 1.0 <= max_weight):
        raise ValueError("need 0 <= min_weight <= 1 <= max_weight")
    if temperature <= 0:
        raise ValueError("temperature must be positive")
    n = signal.shape[0]
    keep = np.ones(n, bool) if mask is None else np.asarray(mask) > 0
    w = np.zeros(n, np.float64)
    if not keep.any():
        return w
    x = np.asarray(signal, np.float64)[keep] / temperature
    log_raw = np.maximum(x - x.max(), _LOG_FLOOR)
    c = _scale(log_raw, min_weight, max_weight)
    u = np.clip(np.exp(log_raw + c), min_weight, max_weight)
    # Bisection leaves the mean 1e-13 off; the unclipped values absorb that exactly.
    free = (u > min_weight) & (u < max_weight)
    if free.any():
        rest = float(u[~free].sum())
        u[free] *= (u.shape[0] - rest) / float(u[free].sum())
    w[keep] = 1.0 + strength * (u - 1.0)
    return w


def _scale(log_raw: FloatArray, low: float, high: float) -> float:
    """log c with mean(clip(exp(log_raw + log c), low, high)) = 1."""
    if float(np.ptp(log_raw)) == 0.0:
        return -float(log_raw[0])  # every raw equal: c·raw = 1 exactly
    # At a = log(low) - max: every value clips to low (mean <= 1); at b = log(high) - min
    # every value clips to high (mean >= 1). With low = 0, start where all are tiny.
    a = (math.log(low) if low > 0 else -745.0) - float(log_raw.max())
    b = math.log(high) - float(log_raw.min())

    def mean_at(lc: float) -> float:
        return float(np.clip(np.exp(log_raw + lc), low, high).mean())

    for _ in range(200):
        mid = 0.5 * (a + b)
        if mean_at(mid) < 1.0:
            a = mid
        else:
            b = mid
        if b - a < 1e-13:
            break
    return 0.5 * (a + b)
