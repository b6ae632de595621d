"""Clock times (``1:30 pm``, ``13:30``, ``12:00``) compared as times of day.

math-verify reads ``12:00`` as the ratio 12/0 and ``1:30 pm`` as 1/30 with its suffix
dropped, so ``1:30 pm`` and ``1:30 am`` compared equal and ``13:30`` did not. An answer
that is one time (``H:MM`` or ``H:MM:SS``, minutes two digits, an optional am/pm) is a
time of day here: two times are equal when they name the same minute of the day.
A time with am/pm against an answer that is no time gets no verdict; a bare ``H:MM``
against one is left to math-verify, which may read it as a ratio (``V_1:V_2 = 11:21``).
"""

from __future__ import annotations

import re

from judge_service.equivalence.result import Verdict

_TIME = re.compile(
    r"(?P<h>\d{1,2}):(?P<m>[0-5]\d)(?::(?P<s>[0-5]\d))?"
    r"\s*(?:\\(?:text|mathrm|mbox)\s*\{\s*(?P<t>[ap])\.?\s*m\.?\s*\}|(?P<p>[ap])\.?\s*m\.?)?",
    re.IGNORECASE,
)


def seconds_of_day(answer: str) -> tuple[int, bool] | None:
    """The second of the day `answer` names, and whether it said am or pm; None if it is
    no clock time (``25:00``, ``13:00 pm``, ``9:5``)."""
    match = _TIME.fullmatch(answer.strip().strip("$").strip())
    if match is None:
        return None
    hour, minute, second = int(match["h"]), int(match["m"]), int(match["s"] or 0)
    suffix = (match["t"] or match["p"] or "").lower()
    if suffix:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if suffix == "p" else 0)
    elif hour > 23:
        return None
    return (hour * 60 + minute) * 60 + second, bool(suffix)


def compare_times(gold: str, pred: str) -> tuple[Verdict, str] | None:
    """A verdict and its reason when either answer is a clock time it decides; else None."""
    times = seconds_of_day(gold), seconds_of_day(pred)
    if times[0] is not None and times[1] is not None:
        if times[0][0] == times[1][0]:
            return "equivalent", "the same time of day"
        return "not_equivalent", "different times of day"
    sides = (("reference", "answer"), ("answer", "reference"))
    for (name, other), time in zip(sides, times, strict=True):
        if time is not None and time[1]:
            return "unknown", f"the {name} is a time of day (am/pm); the {other} is not one"
    return None
