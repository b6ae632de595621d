"""Contrast evidence: a span of one rollout citing a sibling's span ("rollout 2 computes the
same product correctly at ⟦2.68⟧").

A contrast is ``{rollout, start, end, quote}`` and is checked as a quote is: the sibling is
another rollout of the group the judge was shown, ``[start, end)`` lies inside it, and the
quote (folded as validation folds every quote, at least 8 characters or the cited text
whole) occurs within those tokens. It adds to the span's own evidence and never replaces
it: the span's own quote must still be anchored in its own rollout (validate.py), so no
text of one rollout counts as evidence in another.

What a valid contrast buys: a judge may overrule the service's divergence point on a
step (`group.judge`) only with a contrast to a correct sibling that makes the same step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from judge_service.folding import fold
from judge_service.spans import as_int
from judge_service.trace.decode import Trace

MIN_QUOTE_CHARS = 8

ContrastCheck = Callable[[Any], "Contrast | str"]


@dataclass(frozen=True)
class Contrast:
    """A contrast that passed: the cited sibling's tokens [start, end)."""

    rollout: int
    start: int
    end: int


def contrast_check(
    traces: Mapping[int, Trace], own: int, same_as: Mapping[int, int] | None = None
) -> ContrastCheck:
    """The check of rollout `own`'s contrasts against the shown rollouts `traces` (by group
    index); `same_as`: copies of a shown rollout, which are the same rollout."""
    copies = dict(same_as or {})

    def check(raw: Any) -> Contrast | str:
        if not isinstance(raw, Mapping):
            return "contrast must be an object {rollout, start, end, quote}"
        rollout = as_int(raw.get("rollout"))
        start, end = as_int(raw.get("start")), as_int(raw.get("end"))
        quote = raw.get("quote")
        if rollout is None or start is None or end is None:
            return "contrast.rollout, contrast.start and contrast.end must be integers"
        shown = sorted(traces)
        if rollout not in traces:
            return f"contrast.rollout {rollout} is not a rollout of this group (shown: {shown})"
        if copies.get(rollout, rollout) == copies.get(own, own):
            return "contrast.rollout must be a sibling, not the span's own rollout"
        trace = traces[rollout]
        if not 0 <= start < end <= trace.num_tokens:
            return (
                f"contrast range [{start}, {end}) is outside rollout {rollout}'s "
                f"{trace.num_tokens} tokens"
            )
        if not isinstance(quote, str) or not quote.strip():
            return "contrast.quote must quote the cited sibling text"
        low, high = trace.char_range(start, end)
        cited = fold(trace.text[low:high], quote=False)
        folded = fold(quote)
        if len(folded) < min(MIN_QUOTE_CHARS, len(cited)):
            return f"contrast.quote must have at least {MIN_QUOTE_CHARS} characters"
        if folded not in cited:
            return (
                f"contrast.quote {quote[:60]!r} does not occur in rollout {rollout}'s "
                f"tokens [{start}, {end})"
            )
        return Contrast(rollout, start, end)

    return check
