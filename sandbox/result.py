"""What one sandboxed run returns."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal, get_args

ErrorKind = Literal[
    "syntax", "forbidden", "runtime", "timeout", "memory", "output_limit", "internal"
]
ERROR_KINDS: frozenset[str] = frozenset(get_args(ErrorKind))


@dataclass(frozen=True)
class RunResult:
    """The outcome of one run.

    ``ok`` is True only when the code ran to its end. ``value`` is the ``repr``
    of the last expression statement's value (None when the code does not end
    in an expression or the value is None). ``kind`` names the failure; on
    failure ``stdout`` still holds what was printed before it.
    """

    ok: bool
    stdout: str = ""
    value: str | None = None
    kind: ErrorKind | None = None
    message: str = ""
    stdout_truncated: bool = False
    duration_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def failure(cls, kind: ErrorKind, message: str, **extra: Any) -> RunResult:
        return cls(ok=False, kind=kind, message=message, **extra)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        """Rebuild a result the child sent; anything malformed is an internal error."""
        kind = data.get("kind")
        if kind is not None and kind not in ERROR_KINDS:
            return cls.failure("internal", f"the sandbox reported an unknown error kind {kind!r}")
        value = data.get("value")
        return cls(
            ok=bool(data.get("ok")) and kind is None,
            stdout=str(data.get("stdout", "")),
            value=None if value is None else str(value),
            kind=kind,
            message=str(data.get("message", "")),
            stdout_truncated=bool(data.get("stdout_truncated", False)),
            duration_ms=float(data.get("duration_ms", 0.0)),
        )
