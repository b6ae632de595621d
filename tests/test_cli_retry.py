"""``judge-service judge``: resuming what failed (``--retry``), never a half line in OUT,
``--concurrency`` from the settings (issue 10)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from judge_service.cli.main import main
from judge_service.pipeline import Engine


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _lines(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n"), "OUT ends inside a line"
    return text.splitlines()


def _judge(src: Path, out: Path, *extra: str) -> int:
    return main(["judge", str(src), "-o", str(out), "--no-progress", *extra])


def test_retry_rejudges_exactly_the_lines_with_those_statuses(
    tmp_path: Path, example_rollouts: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write(src, example_rollouts)
    assert _judge(src, out) == 0
    first = _lines(out)
    ids = [r["id"] for r in example_rollouts]
    assert [json.loads(line)["id"] for line in first] == ids
    # As if a provider had been down: two fallbacks and a failure, each marked so that a
    # line judged again can be told from one kept.
    marked = {ids[1]: "fallback", ids[4]: "failed", ids[7]: "fallback"}
    edited = []
    for line in first:
        record = json.loads(line)
        if record["id"] in marked:
            line = json.dumps({"id": record["id"], "status": marked[record["id"]], "old": 1})
        edited.append(line)
    out.write_text("".join(line + "\n" for line in edited), encoding="utf-8")
    capsys.readouterr()

    assert _judge(src, out, "--retry", "failed,fallback") == 0
    assert "kept=9" in capsys.readouterr().err
    after = _lines(out)
    assert [json.loads(line)["id"] for line in after] == ids  # order kept, one line each
    for before, now in zip(edited, after, strict=True):
        record = json.loads(now)
        if record["id"] in marked:
            assert "old" not in record and record["status"] == "ok"  # judged again
        else:
            assert now == before  # byte for byte
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl"]

    # Only the statuses named: a fallback is kept when only failed lines are retried.
    out.write_text("".join(line + "\n" for line in edited), encoding="utf-8")
    assert _judge(src, out, "--retry", "failed") == 0
    statuses = [json.loads(line)["status"] for line in _lines(out)]
    assert statuses[1] == "fallback" and statuses[4] == "ok" and statuses[7] == "fallback"


def test_a_plain_rerun_still_skips_every_id_in_out(
    tmp_path: Path, example_rollouts: list[dict[str, Any]]
) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write(src, example_rollouts[:3])
    _write(out, [{"id": example_rollouts[0]["id"], "status": "fallback", "old": 1}])
    assert _judge(src, out) == 0
    records = [json.loads(line) for line in _lines(out)]
    assert records[0] == {"id": example_rollouts[0]["id"], "status": "fallback", "old": 1}
    assert [r["status"] for r in records[1:]] == ["ok", "ok"]


def test_a_half_line_left_by_a_crash_is_cut_off_not_appended_to(
    tmp_path: Path, example_rollouts: list[dict[str, Any]]
) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    rows = example_rollouts[:3]
    _write(src, rows)
    whole = json.dumps({"id": rows[0]["id"], "status": "ok", "old": 1}) + "\n"
    out.write_text(whole + '{"id": "' + rows[1]["id"] + '", "status": "o', encoding="utf-8")
    assert _judge(src, out) == 0
    records = [json.loads(line) for line in _lines(out)]  # every line parses
    assert [r["id"] for r in records] == [r["id"] for r in rows]
    assert records[0]["old"] == 1 and records[1]["status"] == "ok"


def test_a_crash_during_a_retry_leaves_out_as_it_was(
    tmp_path: Path, example_rollouts: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    rows = example_rollouts[:6]
    _write(src, rows)
    _write(out, [{"id": r["id"], "status": "failed", "old": 1} for r in rows])
    before = out.read_bytes()
    calls = 0
    original = Engine.judge_or_fail

    async def crash(self: Engine, *args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise KeyboardInterrupt  # as a ^C (or a SIGKILL) in the middle of the run
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(Engine, "judge_or_fail", crash)
    with pytest.raises(KeyboardInterrupt):
        _judge(src, out, "--retry", "failed", "--concurrency", "1")
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl"]


def test_retry_keeps_lines_of_rollouts_no_longer_in_the_input(
    tmp_path: Path, example_rollouts: list[dict[str, Any]]
) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    rows = example_rollouts[:2]
    _write(src, rows)
    gone = {"id": "gone", "status": "ok", "old": 1}
    _write(out, [gone, {"id": rows[1]["id"], "status": "failed"}])
    os.chmod(out, 0o640)
    assert _judge(src, out, "--retry", "failed") == 0
    records = [json.loads(line) for line in _lines(out)]
    assert [r["id"] for r in records] == [rows[0]["id"], rows[1]["id"], "gone"]
    assert records[2] == gone and records[1]["status"] == "ok"
    assert out.stat().st_mode & 0o777 == 0o640  # the rewrite keeps OUT's permissions


def test_retry_statuses_are_checked(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("", encoding="utf-8")
    with pytest.raises(SystemExit):
        _judge(src, tmp_path / "out.jsonl", "--retry", "failed,broken")


def test_concurrency_defaults_to_the_setting(
    tmp_path: Path, example_rollouts: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[int] = []
    original = Engine.__init__

    def spy(self: Engine, settings: Any, *args: Any, **kwargs: Any) -> None:
        seen.append(settings.max_concurrency)
        original(self, settings, *args, **kwargs)

    monkeypatch.setattr(Engine, "__init__", spy)
    monkeypatch.setenv("JUDGE_MAX_CONCURRENCY", "3")
    src = tmp_path / "in.jsonl"
    _write(src, example_rollouts[:2])
    assert _judge(src, tmp_path / "a.jsonl") == 0
    assert _judge(src, tmp_path / "b.jsonl", "--concurrency", "5") == 0
    assert seen == [3, 5]


def test_an_overflowing_group_fails_its_lines_without_judging_them(
    tmp_path: Path, example_rollouts: list[dict[str, Any]]
) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    rows = [dict(r) for r in example_rollouts[:4]]
    for row, reward in zip(rows[:2], (1e308, 1e308), strict=True):
        row.update(group_id="huge", reward=reward)
    for row, reward in zip(rows[2:], (0.0, 1.0), strict=True):
        row.update(group_id="fine", reward=reward)
    _write(src, rows)
    assert _judge(src, out) == 0
    records = [json.loads(line) for line in _lines(out)]
    assert [r["status"] for r in records] == ["failed", "failed", "ok", "ok"]
    assert records[0]["error"].startswith("line 1.reward: ") and "overflow" in records[0]["error"]
    assert "judge" not in records[0]  # refused before a judge was called
    assert all(isinstance(v, float) for v in records[2]["advantage"])
