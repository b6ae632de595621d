"""What a judged trace page needs beyond the result: the decoded text and each token's chars.

Kept with the stored judgment (same key, same TTL), so `GET /v1/judgments/{key}/view`
paints the text without the policy's tokenizer at hand (a hub id may be unreachable
from the server by then, a local directory gone). The per-token char ranges are
stored as token lengths, 2 bytes a token (4 when one token decodes to more than
65,535 chars), base64: 32k tokens cost ~87 kB beside the text.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from judge_service.trace.decode import Trace


@dataclass(frozen=True)
class TraceSource:
    text: str
    offsets: npt.NDArray[np.int64]  # length T + 1, as `Trace.offsets`
    problem: str = ""
    final_answer: str | None = None
    reference_answer: str | None = None
    reward: float | None = None

    @property
    def num_tokens(self) -> int:
        return int(self.offsets.shape[0]) - 1

    @classmethod
    def of(
        cls,
        trace: Trace,
        *,
        problem: str = "",
        final_answer: str | None = None,
        reference_answer: str | None = None,
        reward: float | None = None,
    ) -> TraceSource:
        return cls(trace.text, trace.offsets, problem, final_answer, reference_answer, reward)

    def as_dict(self) -> dict[str, Any]:
        lengths = np.diff(self.offsets)
        wide = bool(lengths.shape[0]) and int(lengths.max()) > 0xFFFF
        packed = lengths.astype("<u4" if wide else "<u2").tobytes()
        return {
            "text": self.text,
            "token_lengths": base64.b64encode(packed).decode("ascii"),
            "width": 4 if wide else 2,
            "problem": self.problem,
            "final_answer": self.final_answer,
            "reference_answer": self.reference_answer,
            "reward": self.reward,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TraceSource | None:
        """The stored source, or None when it does not fit its text (then the page says the
        text is missing rather than painting spans over the wrong characters)."""
        try:
            text = str(data["text"])
            dtype = "<u4" if int(data.get("width", 2)) == 4 else "<u2"
            lengths = np.frombuffer(base64.b64decode(data["token_lengths"]), dtype)
        except (KeyError, TypeError, ValueError):
            return None
        offsets = np.concatenate(([0], np.cumsum(lengths, dtype=np.int64)))
        if int(offsets[-1]) != len(text):
            return None
        reward = data.get("reward")
        return cls(
            text,
            offsets,
            str(data.get("problem") or ""),
            _text_or_none(data.get("final_answer")),
            _text_or_none(data.get("reference_answer")),
            float(reward) if isinstance(reward, int | float) else None,
        )


def _text_or_none(value: Any) -> str | None:
    return None if value is None else str(value)
