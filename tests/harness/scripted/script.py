"""Provider-neutral scripts: what the scripted judge does on each turn, attempt by attempt."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class Call:
    """A tool call; `raw` (when set) is sent verbatim as the arguments (malformed JSON)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    raw: str | None = None


@dataclass(frozen=True)
class Reply:
    calls: tuple[Call, ...] = ()
    text: str = ""
    output_tokens: int = 20
    cut_off: bool = False  # stopped at the output limit: OpenAI "length", Anthropic "max_tokens"
    # Streamed replies (OpenAI wire): the pause before each chunk, as a model generates; and a
    # stream ended by [DONE] with no finish reason (llama-cpp-python's interrupt_requests).
    chunk_delay_s: float = 0.0
    interrupted: bool = False


@dataclass(frozen=True)
class Fault:
    """An HTTP error response, e.g. 429 with ``retry-after``, a 500, a context-length 400."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    message: str = "scripted fault"
    code: str | None = None  # OpenAI error code, e.g. "context_length_exceeded"


@dataclass(frozen=True)
class Hang:
    """Hold the request this long (or until the server stops) before answering."""

    seconds: float


Action = Reply | Fault | Hang


@dataclass(frozen=True)
class View:
    """What the scripted judge sees of a request: its turn and the tool results it carries."""

    turn: int
    attempt: int
    tool_results: tuple[str, ...]
    body: dict[str, Any]


# A step: an action, a function of the view, or a list of actions per attempt (last repeats).
Step = Action | Callable[[View], Action] | list[Action]


@dataclass
class Script:
    steps: Sequence[Step]
    after_end: Action = field(default_factory=lambda: Reply(text="I have nothing to add."))

    def action(self, view: View) -> Action:
        if view.turn >= len(self.steps):
            return self.after_end
        step = self.steps[view.turn]
        if isinstance(step, list):
            return step[min(view.attempt, len(step) - 1)]
        if callable(step):
            return step(view)
        return step


def as_text(reply: Reply) -> Reply:
    """What a model that cannot call tools writes for `reply`: its text, then each call as
    the JSON object of the judge's JSON tool mode (a `raw` call's arguments verbatim)."""
    objects = [
        f'{{"tool": {json.dumps(c.name)}, "arguments": '
        f"{c.raw if c.raw is not None else json.dumps(c.arguments)}}}"
        for c in reply.calls
    ]
    text = "\n".join(part for part in (reply.text, *objects) if part)
    return replace(reply, calls=(), text=text)


def call(name: str, **arguments: Any) -> Reply:
    return Reply((Call(name, arguments),))


def submit(spans: Sequence[dict[str, Any]], text: str = "") -> Reply:
    return Reply((Call("submit_spans", {"spans": list(spans)}),), text=text)


class ScriptBook:
    """Scripts by name, and how many requests each (script, turn) has had (for retries)."""

    def __init__(self) -> None:
        self.scripts: dict[str, Script] = {}
        self.attempts: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()

    def add(self, name: str, *steps: Step, after_end: Action | None = None) -> None:
        script = Script(list(steps))
        if after_end is not None:
            script.after_end = after_end
        self.scripts[name] = script

    def next_attempt(self, name: str, turn: int) -> int:
        with self._lock:
            attempt = self.attempts.get((name, turn), 0)
            self.attempts[(name, turn)] = attempt + 1
            return attempt
