"""A scripted `Provider` without HTTP: loop unit tests, and the bench's 200 ms provider.

It plays the same `Script` objects as the servers, keyed by the rollout's
``SCRIPT:<name>`` tag, so a test can exercise the loop alone, and the bench can
measure the loop and its concurrency without the SDKs' per-request CPU cost.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence

from judge_service.errors import ProviderError
from judge_service.judges.base import Usage
from judge_service.judges.llm.conversation import (
    AssistantTurn,
    Completion,
    Prompt,
    ToolCall,
    Turn,
    UserTurn,
)
from judge_service.judges.llm.provider import Provider
from judge_service.judges.llm.ratelimit import RateLimiter
from tests.harness.scripted.script import Fault, Hang, Reply, ScriptBook, View

_TAG = re.compile(r"SCRIPT:([\w-]+)")


class ScriptedProvider(Provider):
    kind = "scripted"

    def __init__(
        self,
        book: ScriptBook,
        *,
        delay_s: float = 0.0,
        limiter: RateLimiter | None = None,
        model: str = "fake",
    ) -> None:
        super().__init__(model, limiter or RateLimiter(), request_timeout_s=600.0)
        self.book = book
        self.delay_s = delay_s
        self.calls = 0

    async def _create(
        self, prompt: Prompt, history: Sequence[Turn], *, max_tokens: int, timeout_s: float
    ) -> Completion:
        self.calls += 1
        match = _TAG.search(prompt.context)
        if match is None or match.group(1) not in self.book.scripts:
            raise ProviderError("no script for this rollout")
        key = match.group(1)
        turn = sum(isinstance(t, AssistantTurn) for t in history)
        last = history[-1] if history else None
        results = tuple(o.content for o in last.tool_outputs) if isinstance(last, UserTurn) else ()
        attempt = self.book.next_attempt(key, turn)
        action = self.book.scripts[key].action(View(turn, attempt, results, {}))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if isinstance(action, Hang):
            await asyncio.sleep(action.seconds)
            action = Reply(text="(late)")
        if isinstance(action, Fault):
            raise ProviderError(f"HTTP {action.status}: {action.message}")
        calls = tuple(
            ToolCall(f"call_{key}_{turn}_{i}", c.name, c.arguments, json.dumps(c.arguments))
            for i, c in enumerate(action.calls)
        )
        size = (len(prompt.system) + len(prompt.context)) // 4
        return Completion(
            AssistantTurn(action.text, calls),
            Usage(input_tokens=size, output_tokens=action.output_tokens),
            "tool_use" if calls else "end_turn",
        )

    async def aclose(self) -> None:
        return None
