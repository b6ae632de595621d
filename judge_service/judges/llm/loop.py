"""The tool loop: one model turn at a time until a named stop condition holds.

Before every turn the conditions in `STOP_CONDITIONS` are checked in order;
the first that holds ends the session. The whole session also runs inside
one wall-clock timeout (the rollout's deadline), so a hung provider or tool
cannot outlive it. On ``submit_spans`` the service's own validation runs; if
it rejects anything, the reasons go back as the tool's result and the model
gets exactly one more turn (the repair turn) before the session ends.

Ending: the latest submission is returned whenever there is one, even when a
budget ran out or the provider failed afterwards; without one the session
raises the `JudgeError` of its boundary (`ProviderError` when the deadline
passed waiting for the provider, `BudgetError` otherwise), with the partial
outcome (usage, transcript) attached as ``exc.partial``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from judge_service.errors import BudgetError, JudgeError, ProviderError
from judge_service.judges.base import JudgeLimits, JudgeOutcome, JudgeRequest, SpanCheck, Usage
from judge_service.judges.llm.conversation import Prompt, ToolCall, ToolOutput, Turn, UserTurn
from judge_service.judges.llm.prompt import PromptSet
from judge_service.judges.llm.provider import Provider
from judge_service.judges.llm.transcript import Transcript
from judge_service.tools.base import Tool, ToolContext
from judge_service.tools.trace_tools import SUBMIT_SPANS

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoopConfig:
    max_tokens_per_call: int = 4096
    tool_timeout_s: float = 20.0
    max_idle_replies: int = 2  # consecutive answers without a tool call before giving up
    max_input_tokens: int | None = None  # per rollout: uncached + cache write + cache read


@dataclass
class Session:
    limits: JudgeLimits
    deadline: float  # time.monotonic()
    max_idle_replies: int
    max_input_tokens: int | None = None
    turns: int = 0
    tool_calls: int = 0  # calls of tools other than submit_spans, counted against the budget
    calls_by_name: dict[str, int] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    history: list[Turn] = field(default_factory=list)
    spans: list[Any] | None = None  # the latest submission
    accepted: bool = False  # the latest submission passed validation whole
    repair_pending: bool = False  # rejections were sent; the next turn is the repair turn
    repair_used: bool = False
    idle_replies: int = 0
    refused_turns: int = 0  # turns in which a call was refused for the tool-call budget
    refused_in_turn: bool = False
    waiting_on: str = "the provider"


def submitted(s: Session) -> bool:
    return s.accepted


def repair_used(s: Session) -> bool:
    return s.repair_used


def deadline_passed(s: Session) -> bool:
    return time.monotonic() >= s.deadline


def turns_spent(s: Session) -> bool:
    return s.turns >= s.limits.max_turns


def tool_calls_spent(s: Session) -> bool:
    # Told once that the budget is spent (refused), and kept calling tools anyway.
    return s.refused_turns >= 2


def token_budget_spent(s: Session) -> bool:
    used = s.usage
    read = used.input_tokens + used.cache_write_tokens + used.cache_read_tokens
    over_input = s.max_input_tokens is not None and read >= s.max_input_tokens
    return over_input or used.output_tokens >= s.limits.max_output_tokens


def stalled(s: Session) -> bool:
    return s.idle_replies >= s.max_idle_replies


STOP_CONDITIONS: tuple[tuple[str, Callable[[Session], bool]], ...] = (
    ("submitted", submitted),
    ("repair_used", repair_used),
    ("deadline", deadline_passed),
    ("max_turns", turns_spent),
    ("max_tool_calls", tool_calls_spent),
    ("token_budget", token_budget_spent),
    ("no_tool_calls", stalled),
)


def stop_reason(s: Session) -> str | None:
    return next((name for name, holds in STOP_CONDITIONS if holds(s)), None)


class ToolLoop:
    def __init__(self, provider: Provider, prompts: PromptSet, config: LoopConfig) -> None:
        self.provider = provider
        self.prompts = prompts
        self.config = config

    async def run(
        self,
        request: JudgeRequest,
        prompt: Prompt,
        tools: Mapping[str, Tool],
        check: SpanCheck,
        transcript: Transcript,
    ) -> JudgeOutcome:
        limits = request.limits
        s = Session(
            limits,
            time.monotonic() + limits.deadline_s,
            self.config.max_idle_replies,
            self.config.max_input_tokens,
        )
        context = ToolContext(rollout_id=request.rollout_id, trace=request.trace)
        failure: ProviderError | None = None
        reason: str | None = None
        try:
            async with asyncio.timeout(limits.deadline_s) as clock:
                while (reason := stop_reason(s)) is None:
                    await self._turn(s, prompt, tools, context, check, transcript)
        except TimeoutError:
            if not clock.expired():
                raise
            reason = "deadline"
        except ProviderError as exc:
            reason, failure = "provider_error", exc
            transcript.error(s.turns, exc.boundary, str(exc))
        transcript.stop(s.turns, reason)
        outcome = JudgeOutcome(
            spans=list(s.spans) if s.spans is not None else [],
            turns=s.turns,
            tool_calls=dict(s.calls_by_name),
            usage=s.usage,
            transcript=transcript.entries,
        )
        if s.spans is not None:
            return outcome
        error = failure or self._no_spans_error(reason, s)
        if failure is None:
            transcript.error(s.turns, error.boundary, str(error))
        error.partial = outcome
        raise error

    def _no_spans_error(self, reason: str, s: Session) -> JudgeError:
        limits = s.limits
        if reason == "deadline" and s.waiting_on == "the provider":
            return ProviderError(
                f"no answer from {self.provider.name} within the {limits.deadline_s:g} s deadline"
            )
        messages = {
            "deadline": f"the {limits.deadline_s:g} s deadline passed while waiting on "
            f"{s.waiting_on}, before any spans were submitted",
            "max_turns": f"no spans submitted within {limits.max_turns} turns",
            "max_tool_calls": f"the tool-call budget ({limits.max_tool_calls}) was spent "
            "and no spans were submitted",
            "token_budget": f"the token budget (output {limits.max_output_tokens}, input "
            f"{s.max_input_tokens}) was spent before any spans were submitted",
            "no_tool_calls": f"the model answered {s.idle_replies} times without a tool call "
            "and never submitted spans",
        }
        return BudgetError(messages.get(reason, f"the session ended ({reason}) without spans"))

    async def _turn(
        self,
        s: Session,
        prompt: Prompt,
        tools: Mapping[str, Tool],
        context: ToolContext,
        check: SpanCheck,
        transcript: Transcript,
    ) -> None:
        max_tokens = min(
            self.config.max_tokens_per_call, s.limits.max_output_tokens - s.usage.output_tokens
        )
        s.waiting_on = "the provider"
        completion = await self.provider.complete(
            prompt, s.history, max_tokens=max_tokens, deadline=s.deadline
        )
        s.turns += 1
        s.usage = s.usage + completion.usage
        transcript.assistant(s.turns, completion)
        s.history.append(completion.turn)
        repair_turn, s.repair_pending = s.repair_pending, False
        calls = completion.turn.tool_calls
        if not calls:
            s.idle_replies += 1
            s.repair_used = s.repair_used or repair_turn
            nudge = self.prompts.nudge_text()
            transcript.message(s.turns, nudge)
            s.history.append(UserTurn(text=nudge))
            return
        s.idle_replies = 0
        outputs: list[ToolOutput] = []
        s.refused_in_turn = False
        for call in calls:
            s.waiting_on = f"the {call.name} tool"
            began = time.perf_counter()
            if s.accepted:  # calls after an accepted submission in the same turn: moot
                output = ToolOutput(call.id, call.name, "Skipped: the review is complete.")
            else:
                output = await self._call(s, call, tools, context, check, transcript)
            transcript.tool(s.turns, call, output, round((time.perf_counter() - began) * 1000))
            outputs.append(output)
        s.refused_turns += s.refused_in_turn
        s.repair_used = s.repair_used or repair_turn
        s.history.append(UserTurn(tool_outputs=tuple(outputs)))

    async def _call(
        self,
        s: Session,
        call: ToolCall,
        tools: Mapping[str, Tool],
        context: ToolContext,
        check: SpanCheck,
        transcript: Transcript,
    ) -> ToolOutput:
        def error(text: str) -> ToolOutput:
            return ToolOutput(call.id, call.name, text, is_error=True)

        s.calls_by_name[call.name] = s.calls_by_name.get(call.name, 0) + 1
        if call.error is not None:
            return error(
                f"Error: could not read the arguments of {call.name}: {call.error}. "
                "Call it again with a JSON object that matches its schema."
            )
        tool = tools.get(call.name)
        if tool is None:
            return error(f"Error: unknown tool {call.name!r}; the tools are {', '.join(tools)}.")
        if call.name == SUBMIT_SPANS:
            return await self._submit(s, call, tool, context, check, transcript)
        if s.tool_calls >= s.limits.max_tool_calls:
            s.refused_in_turn = True
            return error(self.prompts.budget_text(s.limits.max_tool_calls))
        s.tool_calls += 1  # per-tool budgets (ToolContext.charge) are the tools' own
        timeout = self.config.tool_timeout_s
        try:
            result = await asyncio.wait_for(tool.call(call.arguments, context), timeout)
        except TimeoutError:
            return error(f"Error: {call.name} timed out after {timeout:g} s.")
        except Exception as exc:  # a tool bug is the model's tool result, not a crash
            log.exception("tool %s failed on rollout %s", call.name, context.rollout_id)
            return error(f"Error: {call.name} failed ({type(exc).__name__}).")
        return ToolOutput(call.id, call.name, result.content, is_error=not result.ok)

    async def _submit(
        self,
        s: Session,
        call: ToolCall,
        tool: Tool,
        context: ToolContext,
        check: SpanCheck,
        transcript: Transcript,
    ) -> ToolOutput:
        result = await tool.call(call.arguments, context)
        if not result.ok:
            return ToolOutput(call.id, call.name, result.content, is_error=True)
        spans = list(result.data["spans"])
        s.spans = spans
        # In a thread: on a long trace a hostile submission can make validation's grounding
        # check parse thousands of lines; a session turn is seconds, the hop is nothing.
        report = await asyncio.to_thread(check, spans)
        s.accepted = not report.rejected
        if s.accepted:
            text = f"Accepted {len(report.accepted)} span(s). The review is complete."
            return ToolOutput(call.id, call.name, text)
        transcript.rejections(s.turns, report)
        s.repair_pending = True
        return ToolOutput(call.id, call.name, self.prompts.repair_text(report), is_error=True)
