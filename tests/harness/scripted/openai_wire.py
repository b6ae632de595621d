"""The OpenAI Chat Completions wire format, with a simulation of automatic prefix caching.

Cached tokens are the longest run of leading messages (tools first) that an
earlier request already sent, counted only from 1,024 tokens and in steps of
128, as OpenAI documents; reported in ``prompt_tokens_details.cached_tokens``.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from typing import Any

from tests.harness.scripted.conformance import (
    STRICT,
    Strictness,
    cut,
    openai_cap,
    openai_refusal,
)
from tests.harness.scripted.script import Fault, Reply, View, as_text

PATH = "/v1/chat/completions"
MIN_CACHED_TOKENS = 1024
_TAG = re.compile(r"SCRIPT:([\w-]+)")


def tokens(value: object) -> int:
    return -(-len(json.dumps(value, ensure_ascii=False)) // 4)


class PrefixCache:
    def __init__(self) -> None:
        self.entries: set[str] = set()
        self._lock = threading.Lock()

    def cached(self, body: dict[str, Any]) -> tuple[int, int]:
        """(prompt tokens, cached tokens) of one request."""
        hasher = hashlib.sha256(json.dumps(body.get("tools", []), sort_keys=True).encode())
        total = tokens(body.get("tools", []))
        prefixes = [(total, hasher.hexdigest())]
        for message in body["messages"]:
            hasher.update(json.dumps(message, sort_keys=True).encode())
            total += tokens(message)
            prefixes.append((total, hasher.hexdigest()))
        with self._lock:
            hit = max((n for n, h in prefixes if h in self.entries), default=0)
            self.entries.update(h for _, h in prefixes)
        cached = hit // 128 * 128 if hit >= MIN_CACHED_TOKENS else 0
        return total, cached


class OpenAIWire:
    path = PATH

    def __init__(self, *, native_tools: bool = True, strict: Strictness = STRICT) -> None:
        self.cache = PrefixCache()
        self.strict = strict  # what it refuses, as real servers do (conformance.py)
        # False: a server that ignores `tools` (no tool parser, or a chat template that drops
        # them): every scripted call comes back as JSON text, as from a request without tools.
        self.native_tools = native_tools

    def script_key(self, body: dict[str, Any]) -> str | None:
        for message in body["messages"]:
            if message["role"] == "user" and isinstance(message.get("content"), str):
                match = _TAG.search(message["content"])
                return match.group(1) if match else None
        return None

    def refusal(self, body: dict[str, Any]) -> Fault | None:
        return openai_refusal(body, self.strict)

    def view(self, body: dict[str, Any], attempt: int) -> View:
        messages = body["messages"]
        turn = sum(1 for m in messages if m["role"] == "assistant")
        results: list[str] = []
        for message in reversed(messages):
            if message["role"] != "tool":
                break
            results.insert(0, message["content"])
        return View(turn, attempt, tuple(results), body)

    def reply(self, reply: Reply, key: str, turn: int, body: dict[str, Any]) -> dict[str, Any]:
        if not (self.native_tools and body.get("tools")):
            reply = as_text(reply)
        reply = cut(reply, openai_cap(body, self.strict))
        calls = [
            {
                "id": f"call_{key}_{turn}_{index}",
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": c.raw if c.raw is not None else json.dumps(c.arguments),
                },
            }
            for index, c in enumerate(reply.calls)
        ]
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if calls:
            message["tool_calls"] = calls
        prompt, cached = self.cache.cached(body)
        return {
            "id": f"chatcmpl-{key}-{turn}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": (
                        "length" if reply.cut_off else "tool_calls" if calls else "stop"
                    ),
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": reply.output_tokens,
                "total_tokens": prompt + reply.output_tokens,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        }

    def stream(self, payload: dict[str, Any], body: dict[str, Any], reply: Reply) -> list[str]:
        """The SSE events of `payload` streamed: a role chunk, the text in pieces, each tool
        call (id and name first, then its arguments in pieces), the finish reason, the usage
        chunk when asked for and the server sends one, then [DONE]."""
        base = {k: payload[k] for k in ("id", "created", "model")}
        base["object"] = "chat.completion.chunk"
        choice = payload["choices"][0]
        message = choice["message"]

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            data = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            return json.dumps(data)

        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": piece}) for piece in _pieces(message.get("content") or "")]
        for index, call in enumerate(message.get("tool_calls", [])):
            head = {"index": index, "id": call["id"], "type": "function"}
            head["function"] = {"name": call["function"]["name"], "arguments": ""}
            events.append(chunk({"tool_calls": [head]}))
            events += [
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                for piece in _pieces(call["function"]["arguments"])
            ]
        if reply.interrupted:
            return [*events, "[DONE]"]
        events.append(chunk({}, choice["finish_reason"]))
        wants_usage = (body.get("stream_options") or {}).get("include_usage")
        if wants_usage and self.strict.stream_usage:
            events.append(json.dumps({**base, "choices": [], "usage": payload["usage"]}))
        return [*events, "[DONE]"]

    def fault(self, fault: Fault) -> dict[str, Any]:
        kind = "invalid_request_error" if fault.status == 400 else "server_error"
        if fault.status == 429:
            kind = "rate_limit_exceeded"
        return {
            "error": {"message": fault.message, "type": kind, "param": None, "code": fault.code}
        }


def _pieces(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]
