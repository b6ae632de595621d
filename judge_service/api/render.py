"""A stored judgment as an HTML page, for a person asking why a span got its label.

Everything shown comes from a trace or a judge, both untrusted: every string is
escaped, and the page loads nothing and runs no script.
"""

from __future__ import annotations

import json
from html import escape

from judge_service.schemas import Result

COLOURS = {
    "verified_correction": "#1a7f37",
    "valid_progress": "#4ac26b",
    "useful_exploration": "#a5d6a7",
    "neutral": "#bbbbbb",
    "unproductive_repetition": "#f2cc60",
    "unsupported": "#f0883e",
    "invalid": "#cf222e",
}
_STYLE = (
    "body{font:14px system-ui,sans-serif;margin:2em;max-width:70em}"
    "table{border-collapse:collapse;width:100%}td,th{border:1px solid #ddd;padding:4px 6px;"
    "text-align:left;vertical-align:top}pre{white-space:pre-wrap;margin:0}"
    ".k{color:#57606a}"
)


def _bar(result: Result, width: int = 900) -> str:
    """The response as one strip, each accepted span painted in its label's colour."""
    total = max(result.num_tokens, 1)
    rects = [f'<rect x="0" y="0" width="{width}" height="18" fill="#f6f8fa"/>']
    for span in result.spans:
        x = width * span.start / total
        w = max(1.0, width * (span.end - span.start) / total)
        colour = COLOURS.get(span.label, "#8250df")
        title = escape(f"[{span.start}, {span.end}) {span.label} {span.score:+g}")
        rects.append(
            f'<rect x="{x:.1f}" y="0" width="{w:.1f}" height="18" fill="{colour}">'
            f"<title>{title}</title></rect>"
        )
    return f'<svg width="{width}" height="18" role="img">{"".join(rects)}</svg>'


def judgment_html(key: str, result: Result) -> str:
    judge = result.judge
    facts = {
        "cache key": key,
        "status": result.status,
        "tokens": str(result.num_tokens),
        "judge": f"{judge.name} ({judge.prompt_version})" if judge else "-",
        "turns / tool calls": (
            f"{judge.turns} / {json.dumps(judge.tool_calls, sort_keys=True)}" if judge else "-"
        ),
        "usage (in / cache write / cache read / out)": (
            f"{judge.input_tokens} / {judge.cache_write_tokens} / {judge.cache_read_tokens} / "
            f"{judge.output_tokens}"
            if judge
            else "-"
        ),
        "credit scale (κ cap)": f"{result.credit_scale:g}",
    }
    rows = "".join(
        f"<tr><td>{s.start}</td><td>{s.end}</td>"
        f'<td style="color:{COLOURS.get(s.label, "#8250df")}">{escape(s.label)}</td>'
        f"<td>{s.score:+g}</td><td>{s.confidence:g}</td><td><pre>{escape(s.evidence)}</pre></td></tr>"
        for s in result.spans
    )
    rejected = "".join(
        f"<tr><td><pre>{escape(json.dumps(r.span, ensure_ascii=False, default=str))}</pre></td>"
        f"<td>{escape(r.reason)}</td></tr>"
        for r in result.rejected_spans
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>judgment {escape(key[:19])}</title><style>{_STYLE}</style></head><body>"
        f"<h1>Judgment of {escape(result.id)}</h1>"
        + "".join(
            f"<div><span class='k'>{escape(k)}:</span> {escape(v)}</div>" for k, v in facts.items()
        )
        + (f"<p>error: {escape(result.error)}</p>" if result.error else "")
        + f"<h2>Spans</h2>{_bar(result)}"
        "<table><tr><th>start</th><th>end</th><th>label</th><th>score</th><th>confidence</th>"
        f"<th>evidence (quoted by the judge, checked against the trace)</th></tr>{rows}</table>"
        f"<h2>Rejected spans</h2><table><tr><th>span</th><th>reason</th></tr>{rejected}</table>"
        "</body></html>"
    )
