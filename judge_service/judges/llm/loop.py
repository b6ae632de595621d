"""The tool loop: one model turn at a time until a named stop condition holds.

Before every turn the conditions in `STOP_CONDITIONS` are checked in order;
the first that holds ends the session. The whole session also runs inside
one wall-clock timeout (the rollout's deadline), so a hung provider or tool
cannot outlive it. On ``submit_spans`` the service's own validation runs; if
it rejects anything, the reasons go back as the tool's result (with what the
service could compute, such as where a misplaced quote does occur) and the
repair phase begins: a few turns (`LoopConfig.repair_max_turns`) in which the
model may look again (`LoopConfig.repair_tools`, at most
`LoopConfig.repair_max_tool_calls` calls) until it submits once more. That
resubmission is final.

A reply the provider stopped at the output limit (OpenAI ``length``,
Anthropic ``max_tokens``) is not a plain answer without a tool call: the model
is told it was cut off (``cutoff.md``), and the last tool call of such a reply,
the one being written when it was cut, is not run but answered the same way.

Ending: the latest submission is returned whenever some of it was accepted,
even when a budget ran out or the provider failed afterwards. A submission
rejected whole whose repair never came (the provider failed, a budget or the
deadline ran out, the repair phase was spent without a resubmission) is no
judgment: the session raises the error of that ending, as it does without any
submission (`ProviderError` when the provider failed or the deadline passed
waiting for it, `BudgetError` otherwise), with the partial outcome (usage,
transcript) attached as ``exc.partial``.
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
from judge_service.judges.llm.provider import Provider, host_of
from judge_service.judges.llm.transcript import Transcript
from judge_service.tools.base import Tool, ToolContext
from judge_service.tools.trace_tools import SUBMIT_SPANS

log = logging.getLogger(__name__)

# Completion.stop_reason values meaning "stopped at the output limit": OpenAI, Anthropic.
CUT_OFF = frozenset({"length", "max_tokens"})


@dataclass(frozen=True)
class LoopConfig:
    max_tokens_per_call: int = 4096
    tool_timeout_s: float = 20.0
    max_idle_replies: int = 2  # consecutive answers without a tool call before giving up
    max_input_tokens: int | None = None  # per rollout: uncached + cache write + cache read
    # The repair phase after a rejection: its turns (the resubmission's included) and the
    # calls of `repair_tools` it may make to find the right positions before resubmitting.
    repair_max_turns: int = 3
    repair_max_tool_calls: int = 3
    repair_tools: tuple[str, ...] = ("view_tokens", "search_trace")


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
    accepted_spans: int = 0  # of the latest submission
    repairing: bool = False  # rejections were sent; no resubmission yet
    repair_turns: int = 0  # turns of the repair phase without a resubmission
    repair_calls: int = 0  # tool calls made in the repair phase
    resubmitted: bool = False
    repair_used: bool = False  # the repair phase is over (resubmitted or spent)
    idle_replies: int = 0
    cutoffs: int = 0  # replies stopped at the output limit
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
        *,
        context: ToolContext | None = None,
    ) -> JudgeOutcome:
        """`context`: what the tools see (default: the request's trace); a group session
        passes every rollout of the group."""
        limits = request.limits
        s = Session(
            limits,
            time.monotonic() + limits.deadline_s,
            self.config.max_idle_replies,
            self.config.max_input_tokens,
        )
        if context is None:
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
        unrepaired = not (s.accepted or s.accepted_spans or s.resubmitted)
        if s.spans is not None and not unrepaired:
            return outcome
        if s.spans is None:
            error = failure or self._no_spans_error(reason, s)
        else:
            error = self._unrepaired_error(reason, failure, s)
        if error is not failure:
            transcript.error(s.turns, error.boundary, str(error))
        raise error.with_partial(outcome) from error.__cause__

    def _who(self) -> str:
        """``openai:smollm2 at 127.0.0.1:8080``: the judge and the endpoint, for errors."""
        return f"{self.provider.name} at {host_of(self.provider.endpoint_url())}"

    def _no_spans_error(self, reason: str, s: Session) -> JudgeError:
        limits = s.limits
        if reason == "deadline" and s.waiting_on == "the provider":
            return ProviderError(
                f"no answer from {self._who()} within the {limits.deadline_s:g} s deadline"
            )
        cut = f" ({s.cutoffs} of them cut off at the output limit)" if s.cutoffs else ""
        messages = {
            "deadline": f"the {limits.deadline_s:g} s deadline passed while waiting on "
            f"{s.waiting_on}, before any spans were submitted",
            "max_turns": f"no spans submitted within {limits.max_turns} turns",
            "max_tool_calls": f"the tool-call budget ({limits.max_tool_calls}) was spent "
            "and no spans were submitted",
            "token_budget": f"the token budget (output {limits.max_output_tokens}, input "
            f"{s.max_input_tokens}) was spent before any spans were submitted",
            "no_tool_calls": f"the model answered {s.idle_replies} times without a tool call"
            f"{cut} and never submitted spans",
        }
        # Named like a provider error: which endpoint and model spent the budget.
        text = messages.get(reason, f"the session ended ({reason}) without spans")
        return BudgetError(f"{self._who()}: {text}")

    def _unrepaired_error(
        self, reason: str, failure: ProviderError | None, s: Session
    ) -> JudgeError:
        """Every span of the submission was rejected and the repair never came: the error
        of how the session ended, saying so (zero accepted spans are no judgment)."""
        rejected = f"every one of the {len(s.spans or [])} submitted spans was rejected"
        if failure is not None:
            error: JudgeError = ProviderError(f"{failure} (during the repair: {rejected})")
            error.__cause__ = failure
            return error
        if reason == "deadline" and s.waiting_on == "the provider":
            return ProviderError(
                f"no answer from {self._who()} within the {s.limits.deadline_s:g} s "
                f"deadline (during the repair: {rejected})"
            )
        ending = {
            "repair_used": f"the repair phase ended after {s.repair_turns} turn(s) "
            "without a new submission",
            "deadline": f"the {s.limits.deadline_s:g} s deadline passed while waiting on "
            f"{s.waiting_on}",
            "max_turns": f"the {s.limits.max_turns} turns were spent",
            "max_tool_calls": f"the tool-call budget ({s.limits.max_tool_calls}) was spent",
            "token_budget": "the token budget was spent",
            "no_tool_calls": f"the model answered {s.idle_replies} times without a tool call",
        }.get(reason, f"the session ended ({reason})")
        return BudgetError(f"{self._who()}: {rejected}, and {ending} before a repaired submission")

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
        in_repair = s.repairing
        cut = completion.stop_reason in CUT_OFF
        s.cutoffs += cut
        calls = completion.turn.tool_calls
        if not calls:
            s.idle_replies += 1
            text = self.prompts.cutoff_text(max_tokens) if cut else self.prompts.nudge_text()
            transcript.message(s.turns, text)
            s.history.append(UserTurn(text=text))
        else:
            s.idle_replies = 0
            outputs: list[ToolOutput] = []
            s.refused_in_turn = False
            for index, call in enumerate(calls):
                s.waiting_on = f"the {call.name} tool"
                began = time.perf_counter()
                if s.accepted:  # calls after an accepted submission in the same turn: moot
                    output = ToolOutput(call.id, call.name, "Skipped: the review is complete.")
                elif cut and index == len(calls) - 1:
                    # The call being written when the reply was cut: its arguments are
                    # incomplete even where they parse (a span list cut short).
                    s.calls_by_name[call.name] = s.calls_by_name.get(call.name, 0) + 1
                    text = self.prompts.cutoff_text(max_tokens)
                    output = ToolOutput(call.id, call.name, text, is_error=True)
                else:
                    output = await self._call(s, call, tools, context, check, transcript)
                transcript.tool(s.turns, call, output, round((time.perf_counter() - began) * 1000))
                outputs.append(output)
            s.refused_turns += s.refused_in_turn
            s.history.append(UserTurn(tool_outputs=tuple(outputs)))
        if in_repair and s.repairing:  # a turn of the repair phase without a resubmission
            s.repair_turns += 1
            if s.repair_turns >= self.config.repair_max_turns:
                s.repairing, s.repair_used = False, True

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
        if s.repairing:
            config = self.config
            if (
                call.name not in config.repair_tools
                or s.repair_calls >= config.repair_max_tool_calls
            ):
                return error(
                    self.prompts.repair_budget_text(
                        config.repair_max_tool_calls, config.repair_tools
                    )
                )
            s.repair_calls += 1
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
        if not result.ok:  # not a submission (bad shape): the repair phase, if any, goes on
            return ToolOutput(call.id, call.name, result.content, is_error=True)
        spans = list(result.data["spans"])
        s.spans = spans
        # In a thread: on a long trace a hostile submission can make validation's grounding
        # check parse thousands of lines; a session turn is seconds, the hop is nothing.
        report = await asyncio.to_thread(check, spans)
        s.accepted = not report.rejected
        s.accepted_spans = len(report.accepted)
        if s.repairing:  # the resubmission: final, whatever validation says
            s.repairing, s.repair_used, s.resubmitted = False, True, True
        if s.accepted:
            text = f"Accepted {len(report.accepted)} span(s). The review is complete."
            return ToolOutput(call.id, call.name, text)
        transcript.rejections(s.turns, report)
        if s.repair_used:  # the session ends here; this reaches the transcript only
            text = f"{len(report.accepted)} span(s) accepted; the review is complete."
            return ToolOutput(call.id, call.name, text, is_error=True)
        s.repairing = True
        text = self.prompts.repair_text(
            report,
            turns=self.config.repair_max_turns,
            tool_calls=self.config.repair_max_tool_calls,
            tools=self.config.repair_tools,
        )
        return ToolOutput(call.id, call.name, text, is_error=True)
