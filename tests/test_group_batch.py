"""options.groupwise: /v1/judge/batch and `judge-service judge --groupwise` judge the
rollouts sharing a group_id as one group (as /v1/judge/group does); a bad group fails
only its own rollouts; /v1/judge and jobs refuse the option, naming it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from judge_service.api.app import create_app
from judge_service.config import Settings
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.conftest import LiveServer
from tests.test_group_route import FALSE_AT_3, RIGHT, WRONG_PLAN, rollout


@pytest.fixture(scope="module")
def server(bpe_dir: Path) -> Iterator[str]:
    with LiveServer(create_app(Settings(default_tokenizer=str(bpe_dir)))) as live:
        yield live.url


def mixed(bpe: LoadedTokenizer) -> list[dict[str, Any]]:
    """Group g (right, wrong plan) and group h interleaved, a lone rollout, and group k
    whose second rollout is of another problem."""
    return [
        rollout(bpe, "g-right", RIGHT, 1.0),
        {**rollout(bpe, "h-right", RIGHT, 1.0), "group_id": "h"},
        {**rollout(bpe, "lone", FALSE_AT_3, 0.0), "group_id": None},
        rollout(bpe, "g-plan", WRONG_PLAN, 0.0),
        {**rollout(bpe, "h-false", FALSE_AT_3, 0.0), "group_id": "h"},
        {**rollout(bpe, "k-1", RIGHT, 1.0), "group_id": "k"},
        {**rollout(bpe, "k-2", RIGHT, 1.0), "group_id": "k", "problem": "another"},
    ]


def test_groupwise_batch_judges_each_group_together(server: str, bpe: LoadedTokenizer) -> None:
    body = {"rollouts": mixed(bpe), "options": {"groupwise": True}}
    with httpx.Client(base_url=server, timeout=60) as client:
        grouped = client.post("/v1/judge/batch", json=body).json()
        plain = client.post("/v1/judge/batch", json={"rollouts": body["rollouts"]}).json()
        group = client.post("/v1/judge/group", json={"rollouts": body["rollouts"][1:5:3]})
    results = grouped["results"]
    assert [r["id"] for r in results] == [r["id"] for r in body["rollouts"]]
    assert [r["status"] for r in results] == ["ok"] * 5 + ["failed"] * 2
    assert "rollouts[6].problem" in results[6]["error"]
    assert results[5]["error"] == results[6]["error"]
    assert grouped["stats"]["counts"] == {"ok": 5, "fallback": 0, "failed": 2}
    blocks = grouped["groups"]
    assert set(blocks) == {"g", "h"}
    # Indices in a block are the group's own, in batch order.
    assert [(p["rollout"], p["sibling"]) for p in blocks["g"]["divergence"]] == [(1, 0)]
    assert [(p["rollout"], p["sibling"]) for p in blocks["h"]["divergence"]] == [(1, 0)]
    # Group h judged in a batch is group h judged alone.
    assert group.status_code == 200, group.text
    assert group.json()["group"] == blocks["h"]
    alone = [r["credit"] for r in group.json()["results"]]
    assert alone == [results[1]["credit"], results[4]["credit"]]
    # Without the option the plan's departure carries no credit; with it, it does.
    start, end = blocks["g"]["divergence"][0]["start"], blocks["g"]["divergence"][0]["end"]
    assert min(results[3]["credit"][start:end]) < 0
    assert min(plain["results"][3]["credit"][start:end]) == 0
    assert "groups" not in plain
    # The lone rollout is judged as in any batch.
    assert results[2]["spans"] == plain["results"][2]["spans"]


def test_one_rollout_refuses_groupwise(server: str, bpe: LoadedTokenizer) -> None:
    one = rollout(bpe, "a", RIGHT, 1.0)
    with httpx.Client(base_url=server, timeout=60) as client:
        single = client.post("/v1/judge", json={"rollout": one, "options": {"groupwise": True}})
    assert single.status_code == 422, single.text
    assert single.json()["field"] == "options.groupwise"


def test_the_command_line_judges_groups_across_the_file(
    tmp_path: Path, bpe: LoadedTokenizer, bpe_dir: Path
) -> None:
    rows = mixed(bpe)
    source = tmp_path / "in.jsonl"
    # Raw UTF-8 ("×" is two bytes), a blank line and a wrapped line: the groups' lines are
    # read again by byte offset when their group is judged.
    lines = [json.dumps({"rollout": r} if i == 1 else r, ensure_ascii=False) for i, r in
             enumerate(rows)]  # fmt: skip
    source.write_text("\n" + "\n".join(lines) + "\n", encoding="utf-8")
    env = {"JUDGE_DEFAULT_TOKENIZER": str(bpe_dir), "PATH": "/usr/bin:/bin"}
    outputs = {}
    for name, extra in (("grouped", ["--groupwise"]), ("plain", [])):
        out = tmp_path / f"{name}.jsonl"
        done = subprocess.run(
            [sys.executable, "-m", "judge_service", "judge", str(source), "-o", str(out),
             "--no-progress", *extra],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        outputs[name] = [json.loads(line) for line in out.read_text().splitlines()]
    grouped, plain = outputs["grouped"], outputs["plain"]
    assert [r["id"] for r in grouped] == [r["id"] for r in rows]
    assert [r["status"] for r in grouped] == ["ok"] * 5 + ["failed"] * 2
    assert "line 7.problem" in grouped[6]["error"]
    # The plan's departure is credited only when its group is judged together.
    # The judge alone credits its true arithmetic; judged together, the point replaces it.
    plan_spans = {(s["start"], s["label"]) for s in grouped[3]["spans"]}
    plain_spans = {(s["start"], s["label"]) for s in plain[3]["spans"]}
    added = {label for _, label in plan_spans - plain_spans}
    replaced = {label for _, label in plain_spans - plan_spans}
    assert (added, replaced) == ({"invalid"}, {"valid_progress"})
    assert grouped[2] == plain[2] | {"judge": grouped[2]["judge"]}
