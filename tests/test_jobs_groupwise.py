"""Groupwise jobs (options.groupwise) over real HTTP and real Redis: one queue entry per
group, the group judged whole by one worker process, its results and block as
`/v1/judge/group` gives them (the blocks in the results pages' `groups`); a bad group
refused at submission, a group a worker's settings refuse failed alone; a worker SIGKILLed
mid-group loses nothing (its groups are judged again whole by another, each written once).
The real SDK against a scripted provider for the LLM judge."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from judge_service.api.app import create_app
from judge_service.config import Settings
from judge_service.schemas import GroupBlock, Result
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.conftest import LiveServer
from tests.harness.scripted import FakeProviderServer, anthropic_server
from tests.harness.scripted.jobs import MODEL, scripted_groups, sessions, worker_settings
from tests.redis_support import (
    pending_of,
    service_env,
    shared_redis,
    start_job_and_wait_busy,
    wait_job,
    worker_processes,
)
from tests.test_group_route import FALSE_AT_3, RIGHT, WRONG_PLAN
from tests.test_group_route import rollout as route_rollout

pytestmark = pytest.mark.redis

RULES = {"judge": "rules", "credit_encoding": "dense"}
GROUPWISE = {**RULES, "groupwise": True}


def mixed(bpe: LoadedTokenizer) -> list[dict[str, Any]]:
    """Two groups interleaved with a rollout alone: g (right, false, plan), h (two right
    by their reward: an equal-reward group, ranked and scored)."""
    in_g = (("right", RIGHT, 1.0), ("false", FALSE_AT_3, 0.0), ("plan", WRONG_PLAN, 0.0))
    in_h = (("right", RIGHT, 1.0), ("false", FALSE_AT_3, 1.0))
    g = [route_rollout(bpe, f"g-{n}", lines, r) for n, lines, r in in_g]
    h = [{**route_rollout(bpe, f"h-{n}", lines, r), "group_id": "h"} for n, lines, r in in_h]
    alone = {**route_rollout(bpe, "alone", RIGHT, 1.0), "group_id": None}
    return [g[0], h[0], g[1], alone, h[1], g[2]]


def comparable(result: dict[str, Any]) -> dict[str, Any]:
    """What the judging decided (not where it was served from: cache, usage, the error's
    field, which names the rollout's place in its own request)."""
    same = Result.model_validate(result).model_dump(mode="json")  # stored JSON omits nulls
    return {k: v for k, v in same.items() if k not in ("cache", "judge", "error")}


def pages(client: httpx.Client, job_id: str, limit: int) -> tuple[list[Any], dict[str, Any]]:
    """Every result of a finished job and every group block, page by page."""
    results: list[dict[str, Any]] = []
    groups: dict[str, Any] = {}
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": limit, **({"cursor": cursor} if cursor else {})}
        page = client.get(f"/v1/jobs/{job_id}/results", params=params)
        assert page.status_code == 200, page.text
        body = page.json()
        assert "groups" in body, body  # a groupwise job's page always has them
        assert not set(body["groups"]) & set(groups), "a block is on one page only"
        results += body["results"]
        groups |= body["groups"]
        if (cursor := body["next_cursor"]) is None:
            return results, groups


def leaders(url: str, prefix: str) -> list[int]:
    """The indices queued on the stream, in order."""
    client: Any = redis.Redis.from_url(url, decode_responses=True)  # loosely typed stubs
    try:
        return [int(fields["i"]) for _, fields in client.xrange(f"{prefix}:queue") if fields]
    finally:
        client.close()


@pytest.fixture
def live(tmp_path: Path, bpe_dir: Path) -> Iterator[tuple[httpx.Client, str, str]]:
    """An API on a fresh Redis prefix with no worker of its own: (client, url, prefix)."""
    with shared_redis() as (url, prefix):
        settings = Settings(
            redis_url=url,
            redis_prefix=prefix,
            default_tokenizer=str(bpe_dir),
            max_group_size=6,
            inprocess_worker="off",
        )
        with (
            LiveServer(create_app(settings)) as server,
            httpx.Client(base_url=server.url, timeout=60) as client,
        ):
            yield client, url, prefix


def test_a_groupwise_job_is_one_entry_per_group_and_equals_the_group_route(
    live: tuple[httpx.Client, str, str], bpe: LoadedTokenizer, bpe_dir: Path, tmp_path: Path
) -> None:
    client, url, prefix = live
    # h gets a third rollout whose token id no tokenizer has: it fails alone.
    bad = {**route_rollout(bpe, "h-bad", RIGHT, 1.0), "group_id": "h"}
    rows = [*mixed(bpe), {**bad, "response_token_ids": [10**9]}]
    created = client.post("/v1/jobs", json={"rollouts": rows, "options": GROUPWISE})
    assert created.status_code == 202, created.text
    job_id = created.json()["id"]
    assert leaders(url, prefix) == [0, 1, 3]  # g's first rollout, h's, the one alone
    env = service_env(redis_url=url, redis_prefix=prefix, default_tokenizer=bpe_dir)
    with worker_processes(["gw-w0"], env, tmp_path, url, prefix):
        view = wait_job(client, job_id, timeout=60)
    results, groups = pages(client, job_id, limit=2)  # groups split over pages

    assert view["status"] == "done" and view["counts"]["failed"] == 1  # h-bad, alone
    assert [r["id"] for r in results] == [r["id"] for r in rows]  # one each, in order
    by_id = {r["id"]: r for r in results}
    assert by_id["h-bad"]["status"] == "failed"
    assert by_id["h-bad"]["error"].startswith("rollouts[6].response_token_ids")
    for group_id in ("g", "h"):
        members = [r for r in rows if r["group_id"] == group_id]
        route = client.post("/v1/judge/group", json={"rollouts": members, "options": RULES})
        assert route.status_code == 200, route.text
        expected = route.json()
        for want in expected["results"]:
            assert comparable(by_id[want["id"]]) == comparable(want), want["id"]
        block = GroupBlock.model_validate(groups[group_id])
        assert block == GroupBlock.model_validate(expected["group"]), group_id
    assert set(groups) == {"g", "h"}
    assert groups["h"]["equal_reward"] and len(groups["h"]["scores"]) == 3
    # g-plan's departure is found only by judging g together (no arithmetic: the rules
    # judge alone leaves it uncovered), so its point is what credits it.
    assert [p["rollout"] for p in groups["g"]["divergence"] if p["applied"]] == [2]
    single = client.post("/v1/judge", json={"rollout": rows[3], "options": RULES})
    assert comparable(by_id["alone"]) == comparable(single.json())


def test_a_group_its_worker_refuses_fails_alone(
    live: tuple[httpx.Client, str, str], bpe: LoadedTokenizer, bpe_dir: Path, tmp_path: Path
) -> None:
    client, url, prefix = live
    rows = mixed(bpe)
    created = client.post("/v1/jobs", json={"rollouts": rows, "options": GROUPWISE})
    assert created.status_code == 202, created.text  # the API allows groups of 6
    job_id = created.json()["id"]
    # A worker whose settings allow groups of 2 (a deployment changing its limits): g (3)
    # fails, each of its results naming why; h and the rollout alone are judged.
    env = service_env(
        redis_url=url, redis_prefix=prefix, default_tokenizer=bpe_dir, max_group_size=2
    )
    with worker_processes(["gw-small"], env, tmp_path, url, prefix):
        view = wait_job(client, job_id, timeout=60)
    results, groups = pages(client, job_id, limit=100)

    assert view["status"] == "done"
    assert (view["counts"]["done"], view["counts"]["failed"]) == (3, 3)
    for result in results:
        if result["id"].startswith("g-"):
            assert result["status"] == "failed", result
            assert result["error"] == (
                "rollouts: 3 rollouts exceed the limit of 2 per group (JUDGE_MAX_GROUP_SIZE)"
            )
        else:
            assert result["status"] == "ok" and result["credit"], result
    assert set(groups) == {"h"}  # a group not judged has no block


def test_a_bad_group_is_refused_and_a_good_one_judged_in_process(
    bpe: LoadedTokenizer, bpe_dir: Path
) -> None:
    rows = mixed(bpe)
    rows[4] = {**rows[4], "problem": "Another problem."}  # h's second rollout
    larger = [*mixed(bpe), {**mixed(bpe)[0], "id": "g-4"}]  # g: 4 rollouts
    settings = Settings(default_tokenizer=str(bpe_dir), max_group_size=3)
    groupwise = {"groupwise": True}
    with LiveServer(create_app(settings)) as live, httpx.Client(base_url=live.url) as client:
        bad = client.post("/v1/jobs", json={"rollouts": rows, "options": groupwise})
        big = client.post("/v1/jobs", json={"rollouts": larger, "options": groupwise})
        plain = client.post("/v1/jobs", json={"rollouts": rows})  # not groupwise: fine
        good = client.post("/v1/jobs", json={"rollouts": mixed(bpe), "options": groupwise})
        assert good.status_code == 202, good.text
        view = wait_job(client, good.json()["id"], timeout=60)  # the in-process queue
        results, groups = pages(client, good.json()["id"], limit=3)
        plain_page = client.get(f"/v1/jobs/{plain.json()['id']}/results").json()
    assert bad.status_code == 422 and bad.json()["field"] == "rollouts[4].problem", bad.text
    assert big.status_code == 413 and big.json()["field"] == "rollouts", big.text
    assert plain.status_code == 202 and "groups" not in plain_page
    assert view["status"] == "done" and [r["id"] for r in results] == [r["id"] for r in mixed(bpe)]
    # g-plan's departure ("Only the 20 matters, so take 17 × 20 = 340 alone.") is found
    # only by judging g together.
    assert any(s["label"] == "invalid" for s in results[5]["spans"]), results[5]["spans"]
    assert set(groups) == {"g", "h"} and groups["g"]["correct"] == [True, False, False]


GROUPS, SIZE = 30, 4
DEADLINE_S, RECLAIM_S = 8, 9


@pytest.fixture
def provider() -> Iterator[FakeProviderServer]:
    with anthropic_server(delay_s=0.2) as fake:
        yield fake


def held(url: str, prefix: str, consumer: str) -> list[int]:
    """The indices of the entries pending under `consumer` (a worker's name and suffix)."""
    client: Any = redis.Redis.from_url(url, decode_responses=True)  # loosely typed stubs
    try:
        stream = f"{prefix}:queue"
        rows = client.xpending_range(stream, "judges", "-", "+", 10_000)
        ids = [r["message_id"] for r in rows if r["consumer"].startswith(consumer)]
        return [int(client.xrange(stream, i, i)[0][1]["i"]) for i in ids]
    finally:
        client.close()


@pytest.mark.slow
def test_a_group_job_survives_a_sigkilled_worker(
    provider: FakeProviderServer,
    bpe: LoadedTokenizer,
    bpe_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    keys = [f"gkill-{g}" for g in range(GROUPS)]
    rows = scripted_groups(provider, bpe, bpe_dir, keys, SIZE)
    with shared_redis() as (url, prefix):
        serving = worker_settings(
            provider,
            redis_url=url,
            redis_prefix=prefix,
            jobs_max_deadline_s=DEADLINE_S,
            jobs_reclaim_idle_s=RECLAIM_S,
            default_tokenizer=str(bpe_dir),
        )
        env = service_env(**serving, worker_concurrency=2)
        names = ["gkill-w0", "gkill-w1", "gkill-w2"]
        api = Settings(**serving, inprocess_worker="off")
        with (
            worker_processes(names, env, tmp_path, url, prefix) as workers,
            LiveServer(create_app(api)) as live,
            httpx.Client(base_url=live.url, timeout=30) as client,
        ):
            options = {"judge": MODEL, "deadline_s": DEADLINE_S, "fallback": "none",
                       "groupwise": True}  # fmt: skip
            body = {"rollouts": rows, "options": options}
            job_id = start_job_and_wait_busy(client, body, url, prefix, "gkill-w0", SIZE)
            workers[0].send_signal(signal.SIGKILL)
            workers[0].wait(timeout=10)
            in_flight = pending_of(url, prefix, "gkill-w0")  # groups, one entry each
            killed = {rows[i]["group_id"] for i in held(url, prefix, "gkill-w0")}
            view = wait_job(client, job_id, timeout=120)
            results, groups = pages(client, job_id, limit=16)
        logs = "\n".join(p.read_text() for p in tmp_path.glob("*.log"))

    assert in_flight > 0 and len(killed) == in_flight  # every entry a group's leader
    assert view["status"] == "done", logs
    assert view["counts"]["done"] == GROUPS * SIZE and view["counts"]["failed"] == 0
    assert [r["id"] for r in results] == [r["id"] for r in rows]  # one each, in order
    assert all(r["status"] == "ok" and r["spans"] for r in results), logs
    # The spans given to rollout 0 lie in the prefix every sibling shares: all hold them.
    for g in range(GROUPS):
        group = results[g * SIZE : (g + 1) * SIZE]
        assert len({json.dumps(r["spans"]) for r in group}) == 1
    # Every group has its block, the killed worker's groups too (written by their taker).
    assert set(groups) == set(keys) and {b["size"] for b in groups.values()} == {SIZE}
    # One session per group (never one per rollout); only a group the killed worker held
    # had one more, by whoever took its entry over, and every session read the whole
    # group: the killed group was judged again whole, never a part of it.
    per_group = sessions(provider)
    assert set(per_group) == set(keys)
    assert GROUPS <= sum(per_group.values()) <= GROUPS + in_flight
    assert {k for k, n in per_group.items() if n > 1} <= killed
    assert max(per_group.values()) <= 2
    for request in provider.requests:
        if request.script is not None and request.turn == 0:
            shown = json.dumps(request.body, ensure_ascii=False)
            assert all(f"## Rollout {m} (" in shown for m in range(SIZE)), request.script
