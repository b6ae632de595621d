"""A ProcessBench trace as one rollout, and the token range of each of its steps.

The steps are joined by a blank line (``"\\n\\n"``) and the whole text is encoded
at once, as a policy would have sampled it; the ids are never re-tokenized step
by step, because that is not what a trainer sends. The service's own decoder
(`LoadedTokenizer.decode`) then gives the exact char range of every token, and

    a token belongs to the last step whose text starts at or before the
    token's last character;

that is, to the step holding its last character, or, when that character is in
a separator, to the step before the separator. So every token belongs to exactly
one step, and a step's tokens are a contiguous range (the owner never decreases
along the ids). A token that BPE merged across a seam goes to the later step:
``".\n\n"`` (Qwen2's pre-tokenizer keeps it whole) stays with the step its ``.``
ends, while ``"\n\nThe"`` and ``".\n\nThe"`` go to the step ``The`` opens. The
predicted first wrong step is read off a span's *first* token, and a span that
starts on a token straddling a seam marks what follows the seam (a span about
the step before would start further back). Tokens carrying the first bytes of a
character that byte-level BPE split own an empty range; the character they
begin counts as their last.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from judge_service.errors import InputError
from judge_service.trace.detokenize import LoadedTokenizer

SEPARATOR = "\n\n"


@dataclass(frozen=True)
class Segmented:
    """The ids of the joined steps, and where each step's tokens begin."""

    token_ids: list[int]
    # step i owns tokens [step_starts[i], step_starts[i + 1]), the last one up to T; a
    # step whose every char went into its neighbour's token owns an empty range
    step_starts: tuple[int, ...]

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    def step_of(self, token: int) -> int:
        """The step holding `token`."""
        if not 0 <= token < self.num_tokens:
            raise ValueError(f"token {token} outside [0, {self.num_tokens})")
        return max(0, bisect.bisect_right(self.step_starts, token) - 1)

    def step_range(self, step: int) -> tuple[int, int]:
        end = self.step_starts[step + 1] if step + 1 < len(self.step_starts) else self.num_tokens
        return self.step_starts[step], end


def segment_steps(tokenizer: LoadedTokenizer, steps: Sequence[str], field: str) -> Segmented:
    """Encode the steps joined by `SEPARATOR` and find each step's tokens; InputError (naming
    `field`.steps[i]) when a step cannot be found in what the tokenizer decodes."""
    text = SEPARATOR.join(steps)
    ids: list[int] = list(tokenizer.hf.encode(text, add_special_tokens=False))
    trace = tokenizer.decode(ids)
    starts = _step_starts(trace.text, text, steps, field)
    first, past = trace.offsets[:-1], trace.offsets[1:]
    last = np.where(past > first, past - 1, first)
    owner = np.maximum(np.searchsorted(starts, last, side="right") - 1, 0)
    step_starts = np.searchsorted(owner, np.arange(len(steps)), side="left")
    return Segmented(ids, tuple(int(s) for s in step_starts))


def _step_starts(
    decoded: str, text: str, steps: Sequence[str], field: str
) -> npt.NDArray[np.int64]:
    """Each step's first char in the decoded text."""
    starts: list[int] = []
    if decoded == text:  # byte-level BPE and most others round-trip exactly
        position = 0
        for step in steps:
            starts.append(position)
            position += len(step) + len(SEPARATOR)
    else:
        # A tokenizer that normalises (or drops a leading space) decodes to other text:
        # find each step in order in what it decodes to.
        position = 0
        for index, step in enumerate(steps):
            found = decoded.find(step.strip(), position)
            if found < 0:
                raise InputError(
                    "the step is not in the text the tokenizer decodes from its own encoding "
                    "(it does not round-trip), so its tokens cannot be found",
                    field=f"{field}.steps[{index}]",
                )
            starts.append(found)
            position = found + len(step.strip())
    return np.asarray(starts, dtype=np.int64)
