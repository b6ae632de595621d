"""The README's screenshots of the bundled examples, taken in headless Chromium.

    .venv/bin/python docs/make_screenshots.py

docs/judged-trace.png: ``GET /v1/judgments/{key}/view`` of examples/rollouts.jsonl's
``mul-error-corrected`` from a real ``judge-service serve``; docs/run-report.png: the
``judge-service report`` of the whole file, one rollout opened.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
CLI = [sys.executable, "-m", "judge_service"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _view_url(work: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    env = {**os.environ, "JUDGE_TOKENIZER_ROOTS": str(EXAMPLES)}
    server = subprocess.Popen(
        [*CLI, "serve", "--port", str(port), "--log-level", "warning"], cwd=ROOT, env=env
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            httpx.get(f"{base}/healthz")
            break
        except httpx.TransportError:
            time.sleep(0.2)
    rollouts = [json.loads(line) for line in (EXAMPLES / "rollouts.jsonl").open()]
    rollout = next(r for r in rollouts if r["id"] == "mul-error-corrected")
    rollout["tokenizer"] = str(EXAMPLES / "tokenizer")
    result = httpx.post(f"{base}/v1/judge", json={"rollout": rollout}, timeout=60).json()
    return server, f"{base}/v1/judgments/{result['cache_key']}/view"


def main() -> None:
    work = Path(tempfile.mkdtemp())
    # run where the rollouts' relative tokenizer path holds, as a user would
    shutil.copytree(EXAMPLES / "tokenizer", work / "examples" / "tokenizer")
    shutil.copy2(EXAMPLES / "rollouts.jsonl", work / "rollouts.jsonl")
    judge = [*CLI, "judge", "rollouts.jsonl", "-o", "results.jsonl", "--judge", "rules"]
    subprocess.run(judge, cwd=work, check=True)
    report_command = [*CLI, "report", "rollouts.jsonl", "results.jsonl", "-o", "run.html"]
    subprocess.run(report_command, cwd=work, check=True)
    report = work / "run.html"
    server, view = _view_url(work)
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            page.goto(view)
            page.locator(".trace .t-invalid").first.hover()
            page.screenshot(path=str(ROOT / "docs" / "judged-trace.png"), full_page=True)
            page = browser.new_page(viewport={"width": 1100, "height": 1500})
            page.goto(report.as_uri())
            page.locator("#rows th", has_text="Σ credit").click()
            page.locator("#rows a", has_text="mul-error-propagated").click()
            page.locator("#trace .trace").wait_for()
            page.evaluate("() => window.scrollTo(0, 0)")
            page.screenshot(path=str(ROOT / "docs" / "run-report.png"), full_page=True)
            browser.close()
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
