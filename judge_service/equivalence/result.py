"""The equivalence checker's policy and verdict types."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Verdict = Literal["equivalent", "not_equivalent", "unknown"]
PercentMode = Literal["lenient", "strict"]


@dataclass(frozen=True)
class EquivalencePolicy:
    """How to read the two answers.

    `degrees_as_radians`: a degree sign means ×π/180 only (so 30° ≡ π/6 and 30° ≢ 30);
    off, 30° is read both ways (30° ≡ 30 and 30° ≡ π/6; 30 ≢ π/6 with no sign written).
    `percent`: ``lenient`` (math-verify's default) accepts 50% for both 50 and 0.5;
    ``strict`` reads 50% as 0.5 only.
    `tolerance`: a relative tolerance under which two numbers are equivalent
    even when math-verify's rounding says otherwise (None: exact, up to
    math-verify's float rounding).
    """

    degrees_as_radians: bool = False
    percent: PercentMode = "lenient"
    tolerance: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EquivalencePolicy:
        tolerance = data.get("tolerance")
        percent = data.get("percent", "lenient")
        if percent not in ("lenient", "strict"):
            raise ValueError(f"percent must be 'lenient' or 'strict', not {percent!r}")
        if tolerance is not None:
            tolerance = float(tolerance)
            if not 0 <= tolerance <= 0.5:
                raise ValueError("tolerance must be between 0 and 0.5")
        return cls(
            degrees_as_radians=bool(data.get("degrees_as_radians", False)),
            percent=percent,
            tolerance=tolerance,
        )


@dataclass(frozen=True)
class EquivalenceResult:
    """A verdict and what was compared: the parsed forms of each side."""

    verdict: Verdict
    reason: str
    gold_parsed: list[str] = field(default_factory=list)
    pred_parsed: list[str] = field(default_factory=list)
    duration_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EquivalenceResult:
        verdict = data.get("verdict")
        if verdict not in ("equivalent", "not_equivalent", "unknown"):
            return cls("unknown", f"the checker returned a malformed verdict {verdict!r}")
        return cls(
            verdict=verdict,
            reason=str(data.get("reason", "")),
            gold_parsed=[str(x) for x in data.get("gold_parsed", [])],
            pred_parsed=[str(x) for x in data.get("pred_parsed", [])],
            duration_ms=float(data.get("duration_ms", 0.0)),
        )
