"""The Anthropic Messages wire format, with a simulation of its prompt cache.

Usage is computed the way the API reports it: tokens (4 characters each, a
deterministic stand-in for the real tokenizer) are walked in prefix order
tools → system → messages; the longest prefix ending at a ``cache_control``
breakpoint that an earlier request wrote is read from the cache, the prefix up
to the last breakpoint is written if it reaches the minimum cacheable length,
and the rest is uncached input. Prefixes are compared with the markers
themselves removed, exactly as a moving breakpoint needs.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from typing import Any

from tests.harness.scripted.conformance import STRICT, Strictness, anthropic_refusal, cut
from tests.harness.scripted.script import Fault, Reply, View, as_text

PATH = "/v1/messages"
MIN_CACHEABLE_TOKENS = 1024
_TAG = re.compile(r"SCRIPT:([\w-]+)")


def tokens(value: object) -> int:
    return -(-len(json.dumps(value, ensure_ascii=False)) // 4)


def _strip_cache_control(block: Any) -> Any:
    if isinstance(block, dict):
        return {k: _strip_cache_control(v) for k, v in block.items() if k != "cache_control"}
    if isinstance(block, list):
        return [_strip_cache_control(v) for v in block]
    return block


def prefix_blocks(body: dict[str, Any]) -> list[tuple[Any, bool]]:
    """Every block of the cacheable prefix in order, with whether it carries a breakpoint."""
    blocks: list[tuple[Any, bool]] = [(t, "cache_control" in t) for t in body.get("tools", [])]
    system = body.get("system", [])
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    blocks += [(b, "cache_control" in b) for b in system]
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        blocks += [({"role": message["role"], **b}, "cache_control" in b) for b in content]
    return blocks


class PromptCache:
    def __init__(self) -> None:
        self.entries: set[str] = set()
        self._lock = threading.Lock()

    def usage(self, body: dict[str, Any]) -> tuple[int, int, int]:
        """(uncached input, cache write, cache read) tokens of one request."""
        hasher = hashlib.sha256()
        total = 0
        breakpoints: list[tuple[int, str]] = []  # (tokens up to here, prefix hash)
        for block, marked in prefix_blocks(body):
            clean = _strip_cache_control(block)
            hasher.update(json.dumps(clean, sort_keys=True).encode())
            total += tokens(clean)
            if marked:
                breakpoints.append((total, hasher.copy().hexdigest()))
        with self._lock:
            read = max((n for n, h in breakpoints if h in self.entries), default=0)
            cacheable = [(n, h) for n, h in breakpoints if n >= MIN_CACHEABLE_TOKENS]
            written = max((n for n, _ in cacheable), default=0)
            self.entries.update(h for _, h in cacheable)
        write = max(0, written - read)
        return total - read - write, write, read


class AnthropicWire:
    path = PATH

    def __init__(self, *, strict: Strictness = STRICT) -> None:
        self.cache = PromptCache()
        self.strict = strict  # what it refuses, as the real API does (conformance.py)

    def script_key(self, body: dict[str, Any]) -> str | None:
        first = body["messages"][0]["content"]
        text = first if isinstance(first, str) else " ".join(b.get("text", "") for b in first)
        match = _TAG.search(text)
        return match.group(1) if match else None

    def view(self, body: dict[str, Any], attempt: int) -> View:
        messages = body["messages"]
        turn = sum(1 for m in messages if m["role"] == "assistant")
        results: list[str] = []
        last = messages[-1]["content"]
        if isinstance(last, list):
            for block in last:
                if block.get("type") == "tool_result":
                    content = block.get("content", "")
                    if isinstance(content, list):
                        content = "".join(c.get("text", "") for c in content)
                    results.append(content)
        return View(turn, attempt, tuple(results), body)

    def refusal(self, body: dict[str, Any]) -> Fault | None:
        return anthropic_refusal(body, self.strict)

    def stream(self, payload: dict[str, Any], body: dict[str, Any], reply: Reply) -> list[str]:
        # The Anthropic provider never streams; a request asking to is a bug in it.
        raise AssertionError("the scripted Anthropic server does not stream")

    def reply(self, reply: Reply, key: str, turn: int, body: dict[str, Any]) -> dict[str, Any]:
        if not body.get("tools"):  # a model shown no tools writes its calls as text
            reply = as_text(reply)
        reply = cut(reply, body.get("max_tokens"))
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for index, c in enumerate(reply.calls):
            arguments: Any = c.raw if c.raw is not None else c.arguments
            content.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{key}_{turn}_{index}",
                    "name": c.name,
                    "input": arguments,
                }
            )
        uncached, write, read = self.cache.usage(body)
        return {
            "id": f"msg_{key}_{turn}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": (
                "max_tokens" if reply.cut_off else "tool_use" if reply.calls else "end_turn"
            ),
            "stop_sequence": None,
            "usage": {
                "input_tokens": uncached,
                "cache_creation_input_tokens": write,
                "cache_read_input_tokens": read,
                "output_tokens": reply.output_tokens,
            },
        }

    def fault(self, fault: Fault) -> dict[str, Any]:
        kinds = {400: "invalid_request_error", 429: "rate_limit_error", 529: "overloaded_error"}
        kind = kinds.get(fault.status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": fault.message}}
