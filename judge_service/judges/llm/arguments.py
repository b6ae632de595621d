"""Tool-call arguments as models write them: strict JSON first, then a few known slips.

Small and self-hosted models often produce JSON that a strict parser refuses
for reasons that do not change its meaning: a raw newline or tab inside a
string (the model "pretty-prints" evidence text), a trailing comma before
``}`` or ``]``, or the object wrapped in a Markdown code fence. Those three are
repaired here, and nothing else: a repair library such as json-repair also
completes truncated values and drops stray prose, which would turn a reply cut
off at the output cap, or text that merely contains braces, into an object the
model never wrote. Whatever is still not a JSON object is an error the loop
sends back to the model.
"""

from __future__ import annotations

import json
import re
from typing import Any

_SPACE = re.compile(r"\s*")
_FENCE = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\r?\n(.*?)\r?\n?```\Z", re.DOTALL)


def parse_arguments(raw: str) -> tuple[dict[str, Any], str, str | None]:
    """(arguments, text, error). `text` is what to send back as the call's arguments: `raw`
    when it was valid JSON, else the repaired object as JSON (servers such as Ollama parse
    the arguments of earlier turns again and refuse invalid ones). On error: {} and why."""
    if not raw.strip():
        return {}, raw, None
    try:
        parsed: Any = json.loads(raw)
        text = raw
    except ValueError as exc:
        parsed = _lenient(raw)
        if parsed is None:
            return {}, raw, f"the arguments are not valid JSON ({exc})"
        text = json.dumps(parsed, ensure_ascii=False)
    if isinstance(parsed, str) and parsed.strip().startswith("{"):
        # Encoded twice (a JSON string holding the object), as some servers return it.
        arguments, inner, error = parse_arguments(parsed)
        return arguments, raw if error else inner, error
    if not isinstance(parsed, dict):
        return {}, raw, "the arguments must be a JSON object"
    return parsed, text, None


def _lenient(raw: str) -> Any:
    """The value of `raw` after the known slips are repaired, or None."""
    text = raw.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    if not text.startswith("{"):
        return None
    try:
        # strict=False admits raw control characters (newlines, tabs) inside strings.
        return json.loads(_drop_trailing_commas(text), strict=False)
    except ValueError:
        return None


def _drop_trailing_commas(text: str) -> str:
    """`text` without commas that only whitespace separates from a closing bracket,
    outside strings."""
    out: list[str] = []
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == ",":
            after = _SPACE.match(text, index + 1).end()  # type: ignore[union-attr]
            if text[after : after + 1] in ("}", "]"):
                continue
        out.append(char)
    return "".join(out)
