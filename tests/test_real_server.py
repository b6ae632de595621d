"""Issue 11: the LLM judge against a real OpenAI-compatible server, llama-cpp-python
serving SmolLM2-135M (`tests/harness/llama_server.py`), through the `judge-service judge`
command as a user runs it, with native tool calls.

A 135M model cannot judge and nothing here asks it to. What must hold is the service's
side: every session gets past its first model turn (the server accepted what we sent
back after a tool call; once, `"content": null` made it answer 500), every result is
`ok` or a `fallback` whose error names the server, no rollout outlives its deadline by
more than a second, and a pre-flight against a closed port stops the run at once.

`.ci/run` builds the server's venv and sets JUDGE_REQUIRE_REAL_SERVER=1, so in CI a
missing server is a failure, not a skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness import llama_server
from tests.harness.llama_server import MODEL_ALIAS, LlamaServer

pytestmark = [pytest.mark.real_server, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
ROLLOUTS = 3  # of the bundled examples, per mode
DEADLINE_S = 300.0  # the first rollout of a mode reads a cold ~4k-token prompt: 30-130 s here


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    python = llama_server.llama_python()
    if python is None:
        if os.environ.get("JUDGE_REQUIRE_REAL_SERVER") == "1":
            pytest.fail("JUDGE_REQUIRE_REAL_SERVER=1 but no llama-cpp-python venv was found")
        pytest.skip("no llama-cpp-python[server] venv (.venv-llamacpp; see .ci/run)")
    log = tmp_path_factory.mktemp("llama") / "server.log"
    running = llama_server.start(python, log)
    yield running
    running.stop()


def _judge(
    tmp_path: Path, env: dict[str, str], *extra: str
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    lines = (REPO / "examples" / "rollouts.jsonl").read_text(encoding="utf-8").splitlines()
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text("\n".join(lines[:ROLLOUTS]) + "\n", encoding="utf-8")
    out = tmp_path / "results.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "judge_service.cli.main",
            "judge",
            str(rollouts),
            "-o",
            str(out),
            "--judge",
            f"openai:{MODEL_ALIAS}",
            "--no-progress",
            *extra,
        ],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=ROLLOUTS * (DEADLINE_S + 30) + 120,
    )
    results = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return done, results


# Native tool calls: llama-cpp-python honours a named tool_choice only
# (`judges/llm/servers.py`); `required` is a 500 under chatml-function-calling (the
# pre-flight test below), and with `auto` this model answers prose. JSON mode: the tools
# described in the system text, each answer one JSON object (grammar-enforced
# json_object). Requests are streamed (the family's default), so a rollout that runs out
# of time frees the server's one slot at once instead of after its reply.
@pytest.mark.parametrize(
    ("tool_mode", "tool_choice"), [("native", "submit_spans"), ("json", "auto")]
)
def test_every_session_gets_past_its_first_turn_on_a_real_server(
    server: LlamaServer, tmp_path: Path, tool_mode: str, tool_choice: str
) -> None:
    env = llama_server.judge_env(server, tool_mode, tool_choice)
    done, results = _judge(
        tmp_path, env, "--include-transcript", "--deadline-s", str(DEADLINE_S), "--max-turns", "3"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(results) == ROLLOUTS
    host = f"127.0.0.1:{server.port}"
    for result in results:
        judge = result["judge"]
        assert result["status"] in ("ok", "fallback"), result
        attempt = judge.get("attempt") or judge
        if result["status"] == "fallback":
            assert host in result["error"] or MODEL_ALIAS in result["error"], result["error"]
            assert len(result["error"]) < 1000
        else:
            assert judge["name"] == f"openai:{MODEL_ALIAS}"
        assert judge["latency_ms"] <= DEADLINE_S * 1000 + 1000
        turns = [e for e in result["transcript"] if e["type"] == "assistant"]
        # Past the first turn: what we sent back after it (a tool result, a nudge, the
        # repair) was accepted by the server and answered.
        assert len(turns) >= 2 or result["status"] == "ok", result["transcript"][-3:]
        assert attempt["output_tokens"] > 0
    if tool_mode == "json":
        return  # a 135M model's JSON answers are rarely a well-formed call; turns suffice
    # At least one session made a real call of a tool (not only replies we could not read).
    calls = [
        e
        for r in results
        for e in r["transcript"]
        if e["type"] == "tool" and e["name"] in ("submit_spans", "view_tokens", "search_trace")
    ]
    assert calls, "no session called a tool"


def test_a_preflight_against_a_closed_port_fails_at_once(tmp_path: Path) -> None:
    port = llama_server.free_port()  # nothing listens there
    env = {
        "JUDGE_LLM_OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1",
        "JUDGE_ALLOWED_JUDGES": f"rules,openai:{MODEL_ALIAS}",
    }
    done, results = _judge(tmp_path, env)
    assert done.returncode != 0
    assert f"127.0.0.1:{port}" in done.stderr and MODEL_ALIAS in done.stderr
    assert results == []


def test_a_forced_tool_choice_the_server_refuses_is_caught_before_the_first_rollout(
    server: LlamaServer, tmp_path: Path
) -> None:
    """`required` under chatml-function-calling: the server answers 500. The pre-flight
    sees it (its request without tools is answered) and names the setting to change."""
    env = llama_server.judge_env(server, "native", "required")
    done, results = _judge(tmp_path, env)
    assert done.returncode != 0 and results == []
    assert f"127.0.0.1:{server.port}" in done.stderr and MODEL_ALIAS in done.stderr
    assert "tool_choice required" in done.stderr and "JUDGE_LLM_TOOL_CHOICE" in done.stderr
