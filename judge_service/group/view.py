"""What an LLM judge reads of a group: each rollout as its own block with ⟦r.n⟧ markers,
and the token prefixes siblings share shown once.

Two rollouts of one prompt often start alike (the same restatement of the problem, the
same first steps). Their common prefix is taken on token ids and kept only as far as the
decoded text agrees too: byte-level BPE can split one character over two tokens, and a
seam there would decode differently in each rollout. A rollout is shown from the end of
its longest common prefix with an earlier shown rollout (its *origin*); a span the judge
places inside a prefix two rollouts share counts for both (`Shared.copies`), so the same
tokens get the same credit wherever they were written.

Markers are the single-trace view's (`trace.markers.mark`: line starts and every 64
tokens; the text escaped, so no forged marker survives) with the rollout's index added:
⟦2.40⟧ is token 40 of rollout 2.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from judge_service.trace.decode import Trace
from judge_service.trace.markers import mark

_MARKER = re.compile(r"⟦(\d+)⟧")


def prefix_length(a: Trace, b: Trace) -> int:
    """Tokens `a` and `b` share from the start: equal ids, and equal text up to there."""
    n = min(a.num_tokens, b.num_tokens)
    differ = np.flatnonzero(a.token_ids[:n] != b.token_ids[:n])
    k = int(differ[0]) if differ.size else n
    while k > 0:  # a character cut at the seam decodes differently in each: back off
        end_a, end_b = int(a.offsets[k]), int(b.offsets[k])
        if end_a == end_b and a.text[:end_a] == b.text[:end_b]:
            break
        k -= 1
    return k


@dataclass(frozen=True)
class Shared:
    """The prefixes the shown rollouts share: `length[(i, j)]` tokens, for i != j."""

    length: Mapping[tuple[int, int], int]
    origin: Mapping[int, tuple[int, int]]  # rollout -> (earlier rollout, tokens shared)

    @classmethod
    def of(cls, traces: Mapping[int, Trace]) -> Shared:
        order = sorted(traces)
        length: dict[tuple[int, int], int] = {}
        origin: dict[int, tuple[int, int]] = {}
        for x, i in enumerate(order):
            for j in order[x + 1 :]:
                k = prefix_length(traces[i], traces[j])
                length[(i, j)] = length[(j, i)] = k
                if k and k > origin.get(j, (-1, 0))[1]:
                    origin[j] = (i, k)
        return cls(length, origin)

    def start(self, rollout: int) -> int:
        """The first token of `rollout` its block shows (the rest is its origin's)."""
        return self.origin.get(rollout, (rollout, 0))[1]

    def copies(self, rollout: int, end: int) -> list[int]:
        """The other rollouts holding tokens [0, end) of `rollout`, unchanged."""
        return sorted(j for (i, j), k in self.length.items() if i == rollout and end <= k)


def rollout_view(rollout: int, trace: Trace, start: int = 0) -> str:
    """Tokens [start, T) of one rollout with ⟦rollout.n⟧ markers (escaped text)."""
    if start >= trace.num_tokens:
        return ""
    text = mark(trace, start=start).text
    return _MARKER.sub(lambda m: f"⟦{rollout}.{m.group(1)}⟧", text)


def group_view(traces: Mapping[int, Trace], shared: Shared) -> str:
    """Every shown rollout's block, in index order; a block starts where its shared
    prefix ends and says whose tokens come before."""
    blocks: list[str] = []
    for r in sorted(traces):
        trace = traces[r]
        head = f"## Rollout {r} ({trace.num_tokens} tokens)"
        if r in shared.origin:
            q, k = shared.origin[r]
            head += (
                f"\nTokens ⟦{r}.0⟧ to ⟦{r}.{k - 1}⟧ are the same as ⟦{q}.0⟧ to ⟦{q}.{k - 1}⟧ "
                f"of rollout {q} (shown there): a span there counts for both."
            )
        body = rollout_view(r, trace, shared.start(r))
        blocks.append(f"{head}\n{body}" if body else f"{head}\n(nothing after the shared part)")
    return "\n\n".join(blocks)
