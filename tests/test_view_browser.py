"""The judged trace and the run report in a real browser: headless Chromium (Debian's
``chromium``) driven through Playwright's DevTools connection.

Each page is opened as a user opens it (the API view over real HTTP from a live server,
the report as a local file); the DOM is then asked what is painted where, whether any
markup from the trace or the judge became an element or ran, and which requests the
page made. Without Chromium (or Playwright) these tests skip, unless
JUDGE_REQUIRE_BROWSER=1 (.ci/run sets it), when they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from judge_service.api.app import create_app
from judge_service.cli.main import main as cli_main
from judge_service.config import Settings
from judge_service.trace import Trace
from judge_service.trace.markers import escape_chars
from tests.conftest import LiveServer

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("JUDGE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# Each would set window.pwned (or make a request) if it ran or loaded.
PAYLOADS = [
    "<script>window.pwned = 1</script>",
    '<img src="http://example.invalid/x.png" onerror="window.pwned = 2">',
    '"><svg onload="window.pwned = 3">',
    "⟦12⟧ fake marker",
]
HOSTILE = (
    "<think>\nLet me compute 17 × 24.\n17 × 24 = 418.\r\n"
    + "\n".join(PAYLOADS)
    + "\nWait, 17 × 20 = 340 and 17 × 4 = 68, so 340 + 68 = 408.\n"
    + "ab" * 1500  # one very long line without a space: it must wrap, not widen the page
    + "\n</think>\n\\boxed{408}"
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    required = os.environ.get("JUDGE_REQUIRE_BROWSER") == "1"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if required:
            raise
        pytest.skip("playwright is not installed (pip install -e '.[dev]')")
    if not Path(CHROMIUM).exists():
        if required:
            pytest.fail(f"JUDGE_REQUIRE_BROWSER=1 but no Chromium at {CHROMIUM}")
        pytest.skip("no chromium (apt-get install chromium)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


class Visit:
    """One page in a fresh context, with every request and console error it caused."""

    def __init__(self, browser: Any, url: str) -> None:
        self.context = browser.new_context(viewport={"width": 1200, "height": 900})
        self.page = self.context.new_page()
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.response = self.page.goto(url)
        self.page.wait_for_load_state("load")

    def ran_nothing(self) -> None:
        assert self.page.evaluate("() => window.pwned === undefined")
        assert self.dialogs == [] and self.errors == []
        handlers = self.page.evaluate(
            """() => Array.from(document.querySelectorAll('*')).flatMap(
                 e => Array.from(e.attributes).map(a => a.name)
               ).filter(n => n.startsWith('on'))"""
        )
        assert handlers == []
        assert self.page.evaluate("() => document.querySelectorAll('img, iframe').length") == 0

    def painted(self, root: str) -> dict[int, str]:
        """The text painted under each span index, in `root`."""
        found: dict[str, str] = self.page.evaluate(
            """root => { const out = {};
                 for (const e of document.querySelectorAll(root + ' .trace span[data-s]'))
                   out[e.dataset.s] = (out[e.dataset.s] || '') + e.textContent;
                 return out; }""",
            root,
        )
        return {int(k): v for k, v in found.items()}

    def close(self) -> None:
        self.context.close()


def _expected(trace: Trace, spans: list[dict[str, Any]]) -> dict[int, str]:
    return {
        i: escape_chars(trace.text[int(trace.offsets[s["start"]]) : int(trace.offsets[s["end"]])])
        for i, s in enumerate(spans)
        if trace.offsets[s["start"]] < trace.offsets[s["end"]]
    }


@pytest.fixture(scope="module")
def server(bpe_dir: Path) -> Iterator[str]:
    settings = Settings(default_tokenizer=str(bpe_dir), max_body_bytes=200_000)
    with LiveServer(create_app(settings)) as live:
        yield live.url


def test_the_api_view_in_a_browser(browser: Any, server: str, bpe: Any, tmp_path: Path) -> None:
    ids = bpe.hf.encode(HOSTILE, add_special_tokens=False)
    rollout = {
        "id": "hostile",
        "problem": 'What is 17 × 24? <img src=x onerror="window.pwned = 5">',
        "response_token_ids": ids,
        "reference_answer": "408",
        "reward": 1.0,
    }
    options = {"include_transcript": True}
    result = httpx.post(
        f"{server}/v1/judge", json={"rollout": rollout, "options": options}, timeout=30
    ).json()
    assert result["status"] == "ok" and result["spans"], result
    visit = Visit(browser, f"{server}/v1/judgments/{result['cache_key']}/view")
    try:
        assert visit.response.status == 200
        csp = visit.response.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src" not in csp
        trace = bpe.decode(ids)
        shown = visit.page.evaluate("() => document.querySelector('.trace').textContent")
        assert shown == escape_chars(HOSTILE)  # every char, CRs included, as text
        assert "〚12〛 fake marker" in shown and "⟦12⟧" not in shown
        for payload in PAYLOADS[:3]:
            assert payload in shown
        assert visit.painted("body") == _expected(trace, result["spans"])
        invalid = visit.page.locator(".trace .t-invalid").first
        assert invalid.text_content() == "17 × 24 = 418"
        assert (invalid.get_attribute("title") or "").startswith("⟦")
        # every piece names its first token: the judge's ⟦n⟧, shown on hover
        invalid.hover()
        hint = visit.page.evaluate(
            "() => getComputedStyle(document.querySelector('.trace .t-invalid'), '::after').content"
        )
        wrong = next(sp for sp in result["spans"] if sp["label"] == "invalid")
        assert invalid.get_attribute("data-t") == str(wrong["start"])
        assert hint == f'"⟦{wrong["start"]}⟧"'
        assert "onerror" in visit.page.evaluate(
            "() => document.querySelector('.problem').textContent"
        )
        assert visit.page.evaluate("() => document.querySelectorAll('script').length") == 0
        assert visit.page.evaluate("() => document.querySelectorAll('svg').length") == 1
        visit.ran_nothing()
        assert visit.requests == [visit.page.url]  # the page itself, nothing else
        # wide enough for the text: a long line wraps instead of widening the page
        assert visit.page.evaluate("() => document.documentElement.scrollWidth <= innerWidth")
        shot = tmp_path / "view.png"
        visit.page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
    finally:
        visit.close()


def test_the_run_report_in_a_browser(browser: Any, bpe: Any, bpe_dir: Path, tmp_path: Path) -> None:
    rollouts = tmp_path / "rollouts.jsonl"
    lines = []
    for i, text in enumerate(
        [HOSTILE, "17 × 24 = 408.\n\\boxed{408}", "Check: " + "1 + 1 = 2, " * 400]
    ):
        lines.append(
            {
                "id": f'<img src=x onerror="window.pwned = 6"> #{i}',
                "group_id": "g",
                "problem": "What is 17 × 24?",
                "reward": float(i % 2),
                "reference_answer": "408",
                "tokenizer": str(bpe_dir),
                "response_token_ids": bpe.hf.encode(text, add_special_tokens=False),
            }
        )
    rollouts.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    results = tmp_path / "results.jsonl"
    # in a process of its own: the browser's driver holds this thread's event loop
    subprocess.run(
        [
            sys.executable,
            "-m",
            "judge_service",
            "judge",
            str(rollouts),
            "-o",
            str(results),
            "--judge",
            "rules",
        ],
        check=True,
        capture_output=True,
    )
    judged = [json.loads(line) for line in results.read_text().splitlines()]
    # one fell back: the report must let a person find it
    judged[2].update(status="fallback", error="provider: the judge timed out <b>x</b>")
    results.write_text("".join(json.dumps(r) + "\n" for r in judged), encoding="utf-8")
    out = tmp_path / "run.html"
    assert cli_main(["report", str(rollouts), str(results), "-o", str(out)]) == 0

    visit = Visit(browser, out.as_uri())
    page = visit.page
    try:
        rows = page.locator("#rows tbody tr")
        assert rows.count() == 3
        assert page.locator("#trace").is_hidden()
        # sort by tokens (descending first), then filter to the fallback
        page.locator("#rows th", has_text="tokens").click()
        tokens = [
            int(t) for t in page.locator("#rows tbody tr td:nth-child(8)").all_text_contents()
        ]
        assert tokens == sorted(tokens, reverse=True)
        page.select_option("#which", "fallback")
        visible = page.locator("#rows tbody tr:visible")
        assert visible.count() == 1 and "fallback" in visible.inner_text()
        assert page.locator("#shown").inner_text() == "1 of 3 rollouts"
        page.select_option("#which", "")
        page.fill("#q", "#1")
        assert page.locator("#rows tbody tr:visible").count() == 1
        page.fill("#q", "")
        # open the hostile rollout: its trace is rendered only now, over the right text
        assert page.locator("#trace .trace").count() == 0
        page.locator("#rows a", has_text="#0").click()
        page.locator("#trace .trace").wait_for()
        assert page.locator("#trace").is_visible()
        trace = bpe.decode(lines[0]["response_token_ids"])
        assert page.evaluate("() => document.querySelector('#trace .trace').textContent") == (
            escape_chars(HOSTILE)
        )
        assert visit.painted("#trace") == _expected(trace, judged[0]["spans"])
        visit.ran_nothing()
        assert page.evaluate("() => document.scripts.length") == 4  # 3 data blocks + 1 fixed
        assert visit.requests == [out.as_uri()]
        assert page.evaluate("() => document.documentElement.scrollWidth <= innerWidth")
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        assert (tmp_path / "report.png").stat().st_size > 10_000
    finally:
        visit.close()
