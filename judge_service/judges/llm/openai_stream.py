"""Streamed Chat Completions, read back into the one response a plain request would get.

Why stream at all: a server that runs a plain request to the end on a worker
thread (llama-cpp-python) keeps generating after the service gave up on it,
and on a one-slot server the next rollouts then wait out their whole deadline
behind a reply nobody reads. A streamed request is checked for a closed
connection at every chunk, so closing it (`collect` does, when the deadline
cancels it) frees the slot within a token.

A stream can also end early: llama-cpp-python's ``interrupt_requests`` ends
an in-flight stream with ``[DONE]`` when another request arrives, and a
server error raised after the 200 (llama-cpp-python refusing a tool_choice
it cannot do, inside its generator) just closes it. A stream that ends
without a finish reason is therefore an error (`StreamCutError`), never a
finished turn.

Usage: with ``stream_options.include_usage`` the last chunk carries it
(OpenAI, vLLM, SGLang, llama.cpp, Ollama). A server that sends none
(llama-cpp-python streams one token per chunk and no usage) is counted as
one output token per chunk that carried text or arguments, and input
tokens as unknown (0); `Completion.notes` says so.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from judge_service.errors import StreamCutError
from judge_service.judges.base import Usage
from judge_service.judges.llm.arguments import parse_arguments
from judge_service.judges.llm.conversation import AssistantTurn, Completion, ToolCall

NO_USAGE_NOTE = (
    "the server streamed no usage: output tokens counted one per chunk, input tokens unknown"
)
OVERSIZE_NOTE = "the stream passed its size bound and was cut there, read as a cut-off reply"
# Characters a reply may stream per token of its output cap: a server that ignores the cap
# would otherwise grow the reply in memory until the deadline.
CHARS_PER_TOKEN_BOUND = 16


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class StreamState:
    """What the chunks have said so far."""

    text: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Any = None
    chunks_with_output: int = 0
    chars: int = 0
    oversize: bool = False

    def add(self, chunk: Any) -> None:
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
        for choice in getattr(chunk, "choices", None) or ():
            if getattr(choice, "index", 0) != 0:
                continue
            delta = choice.delta
            produced = False
            if getattr(delta, "content", None):
                self.text.append(delta.content)
                self.chars += len(delta.content)
                produced = True
            for part in getattr(delta, "tool_calls", None) or ():
                call = self.calls.setdefault(part.index or 0, _PartialCall())
                call.id = call.id or (part.id or "")
                function = getattr(part, "function", None)
                if function is not None:
                    call.name = call.name or (function.name or "")
                    if function.arguments:
                        call.arguments.append(function.arguments)
                        self.chars += len(function.arguments)
                        produced = True
            self.chunks_with_output += produced
            if choice.finish_reason:
                self.finish_reason = str(choice.finish_reason)

    def completion(self, where: str) -> Completion:
        if self.finish_reason is None:
            raise StreamCutError(
                f"the stream from {where} ended without a finish reason (the server stopped "
                "mid-reply: an error on its side after the 200, or llama-cpp-python's "
                "interrupt_requests when another request arrives)"
            )
        calls: list[ToolCall] = []
        for index in sorted(self.calls):
            partial = self.calls[index]
            if not partial.name:
                continue
            arguments, raw, error = parse_arguments("".join(partial.arguments))
            calls.append(
                ToolCall(partial.id or f"call_{index}", partial.name, arguments, raw, error)
            )
        notes: tuple[str, ...] = (OVERSIZE_NOTE,) if self.oversize else ()
        if self.usage is None:
            usage = Usage(output_tokens=self.chunks_with_output)
            notes = (*notes, NO_USAGE_NOTE)
        else:
            usage = usage_of(self.usage)
        return Completion(
            turn=AssistantTurn("".join(self.text), tuple(calls)),
            usage=usage,
            stop_reason=self.finish_reason,
            notes=notes,
        )


def usage_of(usage: Any) -> Usage:
    """Chat Completions usage as ours: cached and written prompt tokens apart from the rest."""
    if usage is None:
        return Usage()
    details = getattr(usage, "prompt_tokens_details", None)
    cached = (getattr(details, "cached_tokens", None) or 0) if details else 0
    written = (getattr(details, "cache_write_tokens", None) or 0) if details else 0
    prompt_tokens = usage.prompt_tokens or 0
    return Usage(
        input_tokens=max(0, prompt_tokens - cached - written),
        cache_write_tokens=written,
        cache_read_tokens=cached,
        output_tokens=usage.completion_tokens or 0,
    )


async def collect(stream: Any, where: str, max_tokens: int) -> Completion:
    """Read `stream` (the SDK's AsyncStream) to its end, or to its size bound (then as a
    reply cut off at the output limit). Cancelled (the deadline), it closes the response
    first, so the server sees the client gone at its next chunk."""
    state = StreamState()
    bound = max_tokens * CHARS_PER_TOKEN_BOUND
    try:
        chunks: AsyncIterator[Any] = stream.__aiter__()
        async for chunk in chunks:
            state.add(chunk)
            if state.chars > bound:
                state.oversize, state.finish_reason = True, "length"
                break
    finally:
        await stream.close()
    return state.completion(where)
