"""How the suffixes scored at one cut are fed to the LM with the least work.

At a cut, B suffixes (forced ending + answer, for a reference and a wrong
answer, in one or two wordings) follow the same cached prefix. Three savings,
none of which changes a number:

* Rows stop after their last answer token. The closer was tokenized only to get
  the seam right; tokens after the answer cannot change the answer's logits.
* Suffixes with the same ending share their first tokens (the ending up to the
  seam). Per group, that shared part runs once as one row and only the rest
  runs as a batch of B rows on top of it; both are cropped off afterwards.
* Only positions that predict an answer token go through the LM head
  (``logits_to_keep`` as an index tensor): on a 49k vocabulary the head is a
  fifth of a small model's work per token.

Logits are shifted by one: position j of a fed sequence predicts its token
j + 1. Suffix token 0 is predicted by the context's last logits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from judge_service.probe.endings import EncodedSuffix


@dataclass(frozen=True)
class SuffixGroup:
    members: tuple[int, ...]  # indices into the suffix list
    shared: tuple[int, ...]  # token ids fed once for the whole group (may be empty)
    shared_keep: tuple[int, ...]  # positions of `shared` whose logits are needed
    rest: tuple[tuple[int, ...], ...]  # per member: its ids after `shared` (never empty)
    rest_keep: tuple[int, ...]  # positions of the padded rest batch whose logits are needed

    @property
    def rest_length(self) -> int:
        return max(len(r) for r in self.rest)

    def padded_rest(self) -> list[list[int]]:
        """Right-padded rows: a causal model's real positions never see later pads."""
        n = self.rest_length
        return [list(r) + [r[0]] * (n - len(r)) for r in self.rest]


@dataclass(frozen=True)
class TokenSource:
    """Where the log-prob of one answer token is read: `where` is ``first`` (the
    context's last logits), ``shared`` or ``rest``; `row` indexes the kept logits;
    `batch` is the member's row in the rest batch."""

    where: str
    row: int
    batch: int
    token: int


def _common_prefix(rows: Sequence[Sequence[int]]) -> int:
    n = min(len(r) for r in rows)
    for k in range(n):
        if any(r[k] != rows[0][k] for r in rows[1:]):
            return k
    return n


def plan_groups(suffixes: Sequence[EncodedSuffix]) -> list[SuffixGroup]:
    if not suffixes:
        raise ValueError("no suffixes to score")
    by_ending: dict[str, list[int]] = {}
    for index, suffix in enumerate(suffixes):
        by_ending.setdefault(suffix.ending, []).append(index)
    groups = []
    for members in by_ending.values():
        rows = [suffixes[m].ids[: suffixes[m].answer_end] for m in members]
        # Each member keeps at least one token of its own; one member alone shares nothing.
        shared = 0 if len(rows) == 1 else min(_common_prefix(rows), min(map(len, rows)) - 1)
        needed = [
            [j - 1 for j in range(max(1, suffixes[m].answer_start), suffixes[m].answer_end)]
            for m in members
        ]
        shared_keep = sorted({p for positions in needed for p in positions if p < shared})
        rest_keep = sorted({p - shared for positions in needed for p in positions if p >= shared})
        groups.append(
            SuffixGroup(
                tuple(members),
                tuple(rows[0][:shared]),
                tuple(shared_keep),
                tuple(tuple(r[shared:]) for r in rows),
                tuple(rest_keep),
            )
        )
    return groups


def token_sources(suffix: EncodedSuffix, group: SuffixGroup, batch: int) -> list[TokenSource]:
    """Where each answer token of `suffix` (member `batch` of `group`) reads its log-prob."""
    shared = len(group.shared)
    sources = []
    for j in range(suffix.answer_start, suffix.answer_end):
        if j == 0:
            sources.append(TokenSource("first", 0, batch, suffix.ids[j]))
        elif j - 1 < shared:
            sources.append(
                TokenSource("shared", group.shared_keep.index(j - 1), batch, suffix.ids[j])
            )
        else:
            row = group.rest_keep.index(j - 1 - shared)
            sources.append(TokenSource("rest", row, batch, suffix.ids[j]))
    return sources
