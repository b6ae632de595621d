"""The judged-trace page model (judge_service.view): what is painted where, on real traces
decoded by a byte-level BPE tokenizer built and loaded as users' are."""

from __future__ import annotations

import asyncio
import base64
import gzip
import html as html_module
import itertools
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from judge_service.api.app import create_app
from judge_service.api.auth import OPEN_TENANT
from judge_service.config import Settings
from judge_service.judgment import Judgment
from judge_service.schemas import JudgeInfo, RejectedSpan, Result, SpanOut
from judge_service.trace import Trace
from judge_service.trace.markers import escape_chars
from judge_service.trace.tokenizer import TokenizerCache
from judge_service.view.html import PAGE_CSP, REPORT_CSP, SCRIPT, csp_hash, page_html
from judge_service.view.model import NO_TEXT, Page, build_page
from judge_service.view.report import write_report
from judge_service.view.source import TraceSource
from tests.conftest import LiveServer

TEXT = (
    "<think>\nLet me compute 17 × 24.\n17 × 24 = 418.\nWait, 17 × 20 = 340 and 17 × 4 = 68,"
    " so 340 + 68 = 408.\n</think>\nSo the answer is \\boxed{408}."
)


def _trace(bpe: Any, text: str) -> Trace:
    trace: Trace = bpe.decode(bpe.hf.encode(text, add_special_tokens=False))
    assert trace.text == text
    return trace


def _tokens_of(trace: Trace, needle: str, occurrence: int = 0) -> tuple[int, int]:
    at = [m.start() for m in re.finditer(re.escape(needle), trace.text)][occurrence]
    return trace.tokens_for_chars(at, at + len(needle))


def _result(
    trace: Trace,
    spans: list[tuple[int, int, str, float, str]],
    rejected: list[dict[str, Any]] | None = None,
) -> Result:
    n = trace.num_tokens
    credit = np.zeros(n)
    for start, end, _label, score, _evidence in spans:
        credit[start:end] = 0.25 * score
    return Result(
        id="r1",
        status="ok",
        num_tokens=n,
        spans=[
            SpanOut(start=s, end=e, label=label, score=score, confidence=0.9, evidence=ev)
            for s, e, label, score, ev in spans
        ],
        rejected_spans=[
            RejectedSpan(span=r, code=r.pop("code"), reason=r.pop("reason")) for r in rejected or []
        ],
        credit=[float(c) for c in credit],
        judge=JudgeInfo(name="rules", prompt_version="rules-2"),
    )


def _page(trace: Trace, result: Result) -> Page:
    return build_page(result, TraceSource.of(trace, problem="What is 17 × 24?"))


def _shaded(page: Page, index: int) -> tuple[int, int]:
    """The char range painted as span `index`: its pieces must be contiguous."""
    pieces = [p for p in page.pieces if p.span == index]
    assert pieces, f"span {index} painted nowhere"
    for before, after in itertools.pairwise(pieces):
        assert before.end == after.start, "a span's pieces must be contiguous"
    return pieces[0].start, pieces[-1].end


def test_shaded_chars_are_each_spans_token_chars(bpe: Any) -> None:
    trace = _trace(bpe, TEXT)
    wrong = _tokens_of(trace, "17 × 24 = 418")
    right = _tokens_of(trace, "340 + 68 = 408")
    result = _result(
        trace,
        [
            (*wrong, "invalid", -1.0, "17 × 24 = 418"),
            (*right, "verified_correction", 1.0, "340 + 68 = 408"),
        ],
    )
    page = _page(trace, result)
    assert "".join(p.text for p in page.pieces) == trace.text  # nothing lost, nothing added
    for index, (start, end) in enumerate([wrong, right]):
        assert _shaded(page, index) == trace.char_range(start, end)
    assert trace.text[slice(*_shaded(page, 0))] == "17 × 24 = 418"
    invalid = next(p for p in page.pieces if p.span == 0)
    assert invalid.tone == "t-invalid" and invalid.level == 4 and invalid.evidence
    assert "invalid" in invalid.title and f"⟦{wrong[0]}⟧" in invalid.title
    assert all(p.span is None and p.level == 0 for p in page.pieces if p.end <= invalid.start)
    # a piece outside every span still names its first token (shown on hover by CSS)
    first = page.pieces[0]
    assert first.first_token == 0 and first.title == ""
    assert '<span data-t="0">' in page_html(page)


def test_evidence_is_highlighted_inside_its_span_only(bpe: Any) -> None:
    trace = _trace(bpe, TEXT)
    start, end = _tokens_of(trace, "Wait, 17 × 20 = 340 and 17 × 4 = 68,")
    result = _result(trace, [(start, end, "valid_progress", 0.5, "17 × 4 = 68")])
    page = _page(trace, result)
    quoted = "".join(p.text for p in page.pieces if p.evidence)
    assert quoted == "17 × 4 = 68"
    assert all(p.span == 0 for p in page.pieces if p.evidence)


def test_rejected_spans_are_outlined_with_their_reason(bpe: Any) -> None:
    trace = _trace(bpe, TEXT)
    start, end = _tokens_of(trace, "Let me compute 17 × 24.")
    accepted = _tokens_of(trace, "17 × 24 = 418")
    result = _result(
        trace,
        [(*accepted, "invalid", -1.0, "17 × 24 = 418")],
        rejected=[
            {
                "start": start,
                "end": end,
                "label": "valid_progress",
                "evidence": "x" * 9,
                "code": "evidence_not_found",
                "reason": "the quote <b>x</b> is not in the span",
            },
            {
                "start": "7",
                "end": 10**9,
                "label": "invalid",
                "code": "out_of_range",
                "reason": "need 0 <= start < end <= T",
            },
        ],
    )
    page = _page(trace, result)
    outlined = [p for p in page.pieces if p.rejected]
    assert (outlined[0].start, outlined[-1].end) == trace.char_range(start, end)
    assert all(p.rejected == (0,) for p in outlined)
    assert "rejected valid_progress" in outlined[0].title
    assert "evidence_not_found" in outlined[0].title
    assert "the quote <b>x</b> is not in the span" in outlined[0].title
    bogus = page.rejected[1]
    assert bogus.start is None and bogus.chars is None and '"7"' in bogus.submitted
    html = page_html(page)
    assert "the quote &lt;b&gt;x&lt;/b&gt; is not in the span" in html
    assert html.count('class="r"') == 1  # one outlined rect on the strip: the valid range


def test_a_character_split_across_byte_tokens(bpe: Any) -> None:
    """An emoji the tokenizer never saw is four byte tokens: the last owns the character,
    the others own empty ranges at its position. A span over any of them paints it."""
    text = "Result: 😀 = 408.\n"
    trace = _trace(bpe, text)
    emoji = text.index("😀")
    owners = [t for t in range(trace.num_tokens) if trace.offsets[t + 1] == emoji + 1]
    assert len(owners) == 1
    last = owners[0]
    empties = [t for t in range(last) if trace.offsets[t] == trace.offsets[t + 1] == emoji]
    assert len(empties) == 3, "expected 4 byte tokens for one emoji"
    for start in (empties[0], empties[1]):
        result = _result(trace, [(start, last + 1, "valid_progress", 0.5, "😀")])
        page = _page(trace, result)
        assert _shaded(page, 0) == (emoji, emoji + 1) == trace.char_range(start, last + 1)
        piece = next(p for p in page.pieces if p.span == 0)
        assert piece.text == "😀" and piece.first_token == empties[0]
        assert piece.last_token == last + 1
        assert "".join(p.text for p in page.pieces) == text


def test_crlf_is_kept_as_characters(bpe: Any) -> None:
    text = "17 × 24 = 418.\r\nWait: 340 + 68 = 408.\r\n\\boxed{408}"
    trace = _trace(bpe, text)
    cr = text.index("\r")
    span = trace.tokens_for_chars(cr, cr + 1)  # a span ending on the CR, before the LF
    result = _result(trace, [(0, span[1], "invalid", -1.0, "17 × 24 = 418")])
    page = _page(trace, result)
    assert "".join(p.text for p in page.pieces) == text
    html = page_html(page)
    painted = html[html.index('<div class="trace"') :]
    painted = painted[: painted.index("</div>")]
    # The parser would turn a raw CR into a second line break; as &#13; it stays one char.
    assert "\r" not in html
    assert painted.count("&#13;") == text.count("\r")


def test_a_very_long_line_is_cut_at_the_judges_markers(bpe: Any) -> None:
    text = "Check: " + "12 * 12 = 144, " * 600 + "done."
    trace = _trace(bpe, text)
    assert trace.num_tokens > 3000 and "\n" not in text
    page = _page(trace, _result(trace, []))
    starts = [p.first_token for p in page.pieces]
    assert starts == list(range(0, trace.num_tokens, 64))
    assert "".join(p.text for p in page.pieces) == text
    html = page_html(page)
    assert all(f'<span data-t="{t}">' in html for t in starts)
    assert "overflow-wrap:anywhere" in html


def test_forged_markers_and_controls_show_as_the_judge_saw_them(bpe: Any) -> None:
    text = "⟦3⟧ fake marker\u202e reversed <script>alert(1)</script>"
    trace = _trace(bpe, text)
    page = _page(trace, _result(trace, []))
    shown = "".join(p.text for p in page.pieces)
    assert shown == escape_chars(text) and "〚3〛" in shown and "\u202e" not in shown
    html = page_html(page)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script" not in html
    assert "script-src" not in PAGE_CSP and "default-src 'none'" in PAGE_CSP


def test_a_judgment_without_text_renders_saying_so(bpe: Any) -> None:
    trace = _trace(bpe, TEXT)
    start, end = _tokens_of(trace, "17 × 24 = 418")
    result = _result(trace, [(start, end, "invalid", -1.0, "17 × 24 = 418")])
    page = build_page(result, None)
    assert page.text_note == NO_TEXT and page.pieces == []
    html = page_html(page)
    assert "was not kept with this judgment" in html and "<rect" in html and "invalid" in html
    # a source that does not fit the result is not painted either
    other = _trace(bpe, "17 × 24 = 408.")
    assert build_page(result, TraceSource.of(other)).pieces == []


def test_the_stored_judgment_keeps_its_source(bpe: Any) -> None:
    trace = _trace(bpe, TEXT + " 😀\r\n")
    source = TraceSource.of(trace, problem="p", final_answer="408", reward=1.0)
    judgment = Judgment(
        status="ok",
        num_tokens=trace.num_tokens,
        info=JudgeInfo(name="rules", prompt_version="rules-2"),
        source=source,
    )
    back = Judgment.loads(judgment.dumps()).source
    assert back is not None and back.text == trace.text and back.reward == 1.0
    np.testing.assert_array_equal(back.offsets, trace.offsets)
    old = Judgment.loads(judgment.dumps().replace('"source":{', '"ignored":{'))
    assert old.source is None  # stored before the text was kept


class _Checker(HTMLParser):
    """Every element the page holds, to prove the data added none."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attrs: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attrs.update(name for name, _ in attrs)


@pytest.mark.parametrize(
    "payload",
    ["<script>alert(1)</script>", '<img src=x onerror="alert(1)">', '"><svg onload=alert(1)>'],
)
def test_markup_in_the_trace_and_judge_text_adds_no_element(bpe: Any, payload: str) -> None:
    trace = _trace(bpe, f"17 × 24 = 418 {payload}\n")
    start, end = _tokens_of(trace, "17 × 24 = 418")
    result = _result(trace, [(start, end, "invalid", -1.0, payload)])
    result.transcript = [{"type": "tool", "name": payload, "content": payload}]
    result.error = payload
    checker = _Checker()
    checker.feed(page_html(_page(trace, result)))
    assert "script" not in checker.tags and "img" not in checker.tags
    assert not {a for a in checker.attrs if a.startswith("on")} and "style" not in checker.attrs


def test_the_api_view_of_a_judgment_stored_before_the_text_was_kept(
    bpe: Any, bpe_dir: Path
) -> None:
    """Over real HTTP: a fresh judgment's view paints its text; the same judgment stored
    without `source` (as before this change) still renders, saying the text is missing."""
    app = create_app(Settings(default_tokenizer=str(bpe_dir)))
    with LiveServer(app) as live, httpx.Client(base_url=live.url, timeout=30) as client:
        ids = bpe.hf.encode(TEXT, add_special_tokens=False)
        body = {"rollout": {"id": "r1", "problem": "What is 17 × 24?", "response_token_ids": ids}}
        key = client.post("/v1/judge", json=body).json()["cache_key"]
        page = client.get(f"/v1/judgments/{key}/view")
        assert page.status_code == 200 and 'class="trace"' in page.text
        assert "17 × 24 = 418" in page.text and NO_TEXT not in page.text
        csp = page.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
        assert "script-src" not in csp and page.headers["x-content-type-options"] == "nosniff"

        store = app.state.store
        stored = json.loads(asyncio.run(store.get_judgment(OPEN_TENANT, key)))
        assert stored["source"]["text"] == TEXT
        del stored["source"]
        old = "sha256:" + "0123456789abcdef" * 4
        asyncio.run(store.put_judgment(OPEN_TENANT, old, json.dumps(stored)))
        page = client.get(f"/v1/judgments/{old}/view")
        assert page.status_code == 200 and "was not kept with this judgment" in page.text
        assert 'class="trace"' not in page.text and "invalid" in page.text


def _blocks(html: str) -> dict[int, str]:
    found = re.findall(
        r'<script type="application/x-judged-trace\+gzip" id="d-(\d+)">(.*?)</script>', html
    )
    return {int(i): gzip.decompress(base64.b64decode(b)).decode() for i, b in found}


def test_the_run_report_file(bpe: Any, bpe_dir: Path, tmp_path: Path) -> None:
    """Totals, rows, and one packed fragment per result: painted where the rollout is in
    the file, saying why not where it is missing or its result does not fit; the page's
    one script is allowed by its hash, and nothing else is."""
    rollouts, results = tmp_path / "rollouts.jsonl", tmp_path / "results.jsonl"
    trace = _trace(bpe, TEXT)
    ids = bpe.hf.encode(TEXT, add_special_tokens=False)
    wrong = _tokens_of(trace, "17 × 24 = 418")
    rows = []
    for i, reward in enumerate([1.0, 0.0]):
        rows.append({"id": f"r{i}", "group_id": "g", "reward": reward, "response_token_ids": ids})
    rollouts.write_text("".join(json.dumps(r) + "\n" for r in rows) + "not json\n")
    good = _result(trace, [(*wrong, "invalid", -1.0, "17 × 24 = 418")])
    good.id = "r0"
    bad = good.model_copy(update={"id": "r1", "status": "fallback", "error": "provider: 503"})
    bad.spans = [bad.spans[0].model_copy(update={"end": trace.num_tokens + 5})]
    orphan = good.model_copy(update={"id": "gone"})
    results.write_text(
        "".join(r.model_dump_json() + "\n" for r in (good, bad, orphan)), encoding="utf-8"
    )
    out = tmp_path / "run.html"
    tok = TokenizerCache()
    report = write_report(
        rollouts, results, out, lambda r: tok.get(str(bpe_dir)).decode(r.response_token_ids)
    )
    html = out.read_text(encoding="utf-8")
    assert [r.id for r in report.rows] == ["r0", "r1", "gone"]
    assert report.rows[0].disagrees and not report.rows[1].disagrees  # r1 fell back, no spans
    assert any("1 lines of the rollouts file" in n for n in report.notes)
    assert any("1 results have no rollout" in n for n in report.notes)
    assert dict(report.fallbacks) == {"provider": 1}
    blocks = _blocks(html)
    assert sorted(blocks) == [0, 1, 2]
    assert 'class="trace"' in blocks[0] and "17 × 24 = 418</span>" in blocks[0]
    assert 'class="trace"' in blocks[1] and 'data-s="0"' not in blocks[1]  # listed, not painted
    assert "not in the rollouts file" in blocks[2] and 'class="trace"' not in blocks[2]
    script = html[html.rindex("<script>") + len("<script>") : html.rindex("</script>")]
    assert script == SCRIPT
    meta = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)
    assert meta and html_module.unescape(meta.group(1)) == REPORT_CSP
    assert csp_hash(SCRIPT) in REPORT_CSP
    assert "unsafe-inline" not in REPORT_CSP and "default-src 'none'" in REPORT_CSP
    assert html.count("<script>") == 1  # the data blocks are not scripts a browser runs
