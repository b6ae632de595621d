"""Which tokenizers a server loads, and what a name that cannot be loaded costs: over real
HTTP against the app, with stand-in hubs on loopback (tests/hub_support.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest
from fastapi import FastAPI

from judge_service.api.app import create_app
from judge_service.config import Settings
from judge_service.errors import TokenizerError, UnavailableError
from judge_service.trace import loading
from judge_service.trace.tokenizer import LoadedTokenizer, TokenizerCache, TokenizerPolicy
from tests.conftest import LiveServer
from tests.harness.tokenizers import build_byte_level_bpe
from tests.hub_support import Blackhole, FakeHub, refused_url

ROOT = Path(__file__).resolve().parent.parent
LOAD_TIMEOUT_S = 1.5
TWO_MB = "x" * (2 * 1024 * 1024)


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The one directory this server loads local tokenizers from."""
    root = tmp_path_factory.mktemp("roots")
    build_byte_level_bpe(root / "tok")
    return root


@pytest.fixture(scope="module")
def served(bpe_dir: Path, roots: Path) -> Iterator[tuple[FastAPI, str]]:
    settings = Settings(
        default_tokenizer=str(bpe_dir),
        allowed_tokenizers=["judge-test/*"],
        tokenizer_roots=[str(roots)],
        tokenizer_load_timeout_s=LOAD_TIMEOUT_S,
        tokenizer_failure_ttl_s=60,
        max_body_bytes=8 * 1024 * 1024,
        max_tokens_per_rollout=5000,
    )
    app = create_app(settings)
    with LiveServer(app) as live:
        yield app, live.url


@pytest.fixture
def client(served: tuple[FastAPI, str]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served[1], timeout=60) as c:
        yield c


@pytest.fixture
def cache(served: tuple[FastAPI, str]) -> TokenizerCache:
    tokenizers: TokenizerCache = served[0].state.engine.tokenizers
    return tokenizers


@pytest.fixture
def hole(monkeypatch: pytest.MonkeyPatch) -> Iterator[Blackhole]:
    with Blackhole() as blackhole:
        monkeypatch.setenv("HF_ENDPOINT", blackhole.url)
        yield blackhole


def _rollout(tokenizer: str | None = None, ids: list[int] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "r1",
        "problem": "What is 2 + 2?",
        "response_token_ids": [5, 6, 7] if ids is None else ids,
    }
    if tokenizer is not None:
        body["tokenizer"] = tokenizer
    return body


def _judge(client: httpx.Client, tokenizer: str | None = None, **kw: Any) -> httpx.Response:
    return client.post("/v1/judge", json={"rollout": _rollout(tokenizer, **kw)})


def _timed(client: httpx.Client, tokenizer: str) -> tuple[httpx.Response, float]:
    began = time.monotonic()
    response = _judge(client, tokenizer)
    return response, time.monotonic() - began


# --- which names a server loads ------------------------------------------------------


def test_a_hub_id_off_the_allow_list_is_422_before_any_network(
    client: httpx.Client, hole: Blackhole
) -> None:
    response = _judge(client, "Qwen/Qwen3-0.6B")
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "rollout.tokenizer"
    assert "JUDGE_ALLOWED_TOKENIZERS" in response.json()["detail"]
    assert hole.connections == 0


def test_local_directories_only_under_the_roots(
    client: httpx.Client, roots: Path, metaspace_dir: Path, tmp_path: Path
) -> None:
    assert _judge(client, str(roots / "tok")).status_code == 200
    # A real tokenizer outside the roots; the same reached through `..`; a symlink inside
    # the root to it: each a 422 naming the field, and nothing loaded.
    (roots / "link").symlink_to(metaspace_dir, target_is_directory=True)
    escape = str(roots / ".." / metaspace_dir.parent.name / metaspace_dir.name)
    for name in (str(metaspace_dir), escape, str(roots / "link")):
        response = _judge(client, name)
        assert response.status_code == 422, (name, response.text)
        assert response.json()["field"] == "rollout.tokenizer"
        assert "JUDGE_TOKENIZER_ROOTS" in response.json()["detail"]


def test_the_default_tokenizer_is_always_allowed(client: httpx.Client, bpe_dir: Path) -> None:
    assert _judge(client).status_code == 200
    assert _judge(client, str(bpe_dir)).status_code == 200


def test_names_too_long_or_not_text_are_small_422s(
    client: httpx.Client, cache: TokenizerCache
) -> None:
    before = cache.sizes()
    for _ in range(60):
        response = _judge(client, TWO_MB)
        assert response.status_code == 422
        assert response.json()["field"] == "rollout.tokenizer"
        assert len(response.content) < 1024
    assert cache.sizes() == before
    surrogate = json.dumps({"rollout": _rollout("judge-test/\ud800")})  # a "\ud800" escape
    response = client.post(
        "/v1/judge", content=surrogate, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "rollout.tokenizer"
    response = _judge(client, "judge-test/a\x00b")  # os.stat raises on NUL
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "rollout.tokenizer"


# --- a hub that cannot be reached ------------------------------------------------------


def test_an_unreachable_hub_is_a_503_within_the_deadline_then_at_once(
    client: httpx.Client, hole: Blackhole
) -> None:
    response, took = _timed(client, "judge-test/blackholed")
    assert response.status_code == 503, response.text
    assert took < LOAD_TIMEOUT_S + 2.5
    assert int(response.headers["retry-after"]) >= 1
    assert response.json()["field"] == "rollout.tokenizer"
    # The second request within the failure TTL does not wait and does not ask again.
    time.sleep(0.2)
    response, took = _timed(client, "judge-test/blackholed")
    assert response.status_code == 503 and "retry-after" in response.headers
    assert took < 0.8
    assert hole.connections == 1


def test_concurrent_requests_for_a_name_share_one_load(
    client: httpx.Client, hole: Blackhole, cache: TokenizerCache
) -> None:
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: _timed(client, "judge-test/shared"), range(8)))
    assert [r.status_code for r, _ in answers] == [503] * 8
    assert max(took for _, took in answers) < LOAD_TIMEOUT_S + 2.5
    assert hole.connections == 1
    deadline = time.monotonic() + 10  # the load's thread ends with its one HEAD request
    while cache.sizes()["loading"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert cache.sizes()["loading"] == 0


def test_a_hung_hub_does_not_hold_up_other_requests(
    client: httpx.Client, hole: Blackhole, served: tuple[FastAPI, str]
) -> None:
    with ThreadPoolExecutor(8) as pool:
        waiting = [pool.submit(_judge, client, f"judge-test/hung-{i % 2}") for i in range(8)]
        time.sleep(0.3)
        with httpx.Client(base_url=served[1], timeout=30) as other:
            began = time.monotonic()
            assert other.get("/healthz").status_code == 200
            assert _judge(other).status_code == 200
            took = time.monotonic() - began
        assert [w.result().status_code for w in waiting] == [503] * 8
    assert took < 1.0
    assert hole.connections == 2


def test_a_job_is_refused_as_a_request_is(client: httpx.Client, hole: Blackhole) -> None:
    def submit(name: str) -> httpx.Response:
        return client.post("/v1/jobs", json={"rollouts": [_rollout(), _rollout(name)]})

    response = submit("Qwen/Qwen3-0.6B")
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "rollouts[1].tokenizer"
    assert hole.connections == 0
    response = submit("judge-test/job-hub")
    assert response.status_code == 503, response.text
    assert response.json()["field"] == "rollouts[1].tokenizer"
    assert "retry-after" in response.headers
    assert hole.connections == 1


def test_a_refusing_hub_is_a_503_at_once(
    client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", refused_url())
    response, took = _timed(client, "judge-test/refused")
    assert response.status_code == 503, response.text
    assert took < 2.0
    assert 1 <= int(response.headers["retry-after"]) <= 60


def test_a_repo_the_hub_does_not_have_is_a_422(
    client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeHub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        response = _judge(client, "judge-test/no-such-repo")
        assert response.status_code == 422, response.text
        assert response.json()["field"] == "rollout.tokenizer"
        assert len(hub.requests) == 1
        assert _judge(client, "judge-test/no-such-repo").status_code == 422
        assert len(hub.requests) == 1  # the failure is remembered


def test_in_a_batch_an_unreachable_hub_fails_only_its_rollout(
    client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", refused_url())
    rollouts = [_rollout(), _rollout("judge-test/batch-down"), _rollout()]
    for i, rollout in enumerate(rollouts):
        rollout["id"] = f"r{i}"
    response = client.post("/v1/judge/batch", json={"rollouts": rollouts})
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["status"] for r in results] == ["ok", "failed", "ok"]
    assert "tokenizer" in results[1]["error"]


# --- token ids ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [2**63, 2**64 + 5, -(2**63) - 1, 10**40, -1])
def test_an_id_outside_int64_is_a_422_naming_it(client: httpx.Client, bad: int) -> None:
    response = _judge(client, ids=[5, 6, bad, 7])
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "rollout.response_token_ids[2]"


def test_an_id_past_the_vocabulary_is_a_422_naming_it(
    client: httpx.Client, bpe: LoadedTokenizer
) -> None:
    response = _judge(client, ids=[5, bpe.vocab_size])
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "rollout.response_token_ids[1]"
    assert str(bpe.vocab_size) in response.json()["detail"]


def test_in_a_batch_a_bad_id_fails_only_its_rollout(
    client: httpx.Client, bpe: LoadedTokenizer
) -> None:
    rollouts = [_rollout(), _rollout(ids=[5, 2**63]), _rollout(ids=[bpe.vocab_size])]
    for i, rollout in enumerate(rollouts):
        rollout["id"] = f"r{i}"
    response = client.post("/v1/judge/batch", json={"rollouts": rollouts})
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["status"] for r in results] == ["ok", "failed", "failed"]
    assert results[1]["error"].startswith("rollouts[1].response_token_ids[1]: ")
    assert results[2]["error"].startswith("rollouts[2].response_token_ids[0]: ")


# --- the cache itself ---------------------------------------------------------------------


def test_failed_names_leave_one_bounded_entry_each(tmp_path: Path) -> None:
    cache = TokenizerCache(policy=TokenizerPolicy(roots=[str(tmp_path)]), max_failures=16)
    for i in range(60):
        with pytest.raises(TokenizerError) as info:
            cache.get(TWO_MB + str(i))
        assert len(info.value.message) < 200
    assert cache.sizes() == {"loaded": 0, "loading": 0, "failed": 0}
    for i in range(60):  # directories without a tokenizer in them: loads that fail
        (tmp_path / f"d{i}").mkdir()
        with pytest.raises(TokenizerError):
            cache.get(str(tmp_path / f"d{i}"))
    assert cache.sizes() == {"loaded": 0, "loading": 0, "failed": 16}


def test_loads_in_flight_are_capped(hole: Blackhole) -> None:
    # Each load holds a thread until the hub answers: invented names cannot add more.
    cache = TokenizerCache(allowed=["judge-test/*"], load_timeout_s=2.0, max_loads=1)
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(cache.get, "judge-test/first")
        deadline = time.monotonic() + 10
        while not hole.connections and time.monotonic() < deadline:  # its HEAD is out
            time.sleep(0.01)
        with pytest.raises(UnavailableError, match="from the hub already") as info:
            cache.get("judge-test/second")
        assert info.value.retry_after_s >= 1
        with pytest.raises(UnavailableError):
            first.result()
    assert hole.connections == 1


def test_a_failure_is_repeated_until_its_ttl_then_retried(tmp_path: Path) -> None:
    cache = TokenizerCache(failure_ttl_s=0.5)
    target = tmp_path / "later"
    target.mkdir()
    with pytest.raises(TokenizerError) as first:
        cache.get(str(target), "rollouts[3].tokenizer")
    build_byte_level_bpe(tmp_path / "built")
    for item in (tmp_path / "built").iterdir():
        shutil.copy(item, target / item.name)
    began = time.monotonic()
    with pytest.raises(TokenizerError) as again:  # the same error, without a load
        cache.get(str(target), "rollout.tokenizer")
    assert time.monotonic() - began < 0.05
    assert again.value.message == first.value.message
    assert again.value.field == "rollout.tokenizer"
    time.sleep(0.6)
    assert cache.get(str(target)).vocab_size > 0


def test_the_command_line_trusts_any_name_and_a_server_only_its_own(
    bpe_dir: Path, metaspace_dir: Path
) -> None:
    settings = Settings(default_tokenizer=str(bpe_dir), tokenizer_roots=[])
    trusted = TokenizerCache.from_settings(settings, trusted=True)
    assert trusted.get(str(metaspace_dir)).vocab_size > 0
    server = TokenizerCache.from_settings(settings)
    assert server.get(str(bpe_dir)).vocab_size > 0
    with pytest.raises(TokenizerError, match="JUDGE_TOKENIZER_ROOTS"):
        server.get(str(metaspace_dir))
    with pytest.raises(TokenizerError, match="JUDGE_ALLOWED_TOKENIZERS"):
        server.get("Qwen/Qwen3-0.6B")


def test_patterns_match_hub_ids_only() -> None:
    policy = TokenizerPolicy(allowed=["Qwen/*", "*"], roots=[])
    assert not policy.resolve("Qwen/Qwen3-8B", "tokenizer").local
    with pytest.raises(TokenizerError, match="JUDGE_TOKENIZER_ROOTS"):
        policy.resolve("/etc", "tokenizer")  # "*" matches it, but it is not a hub id


# --- the hub itself: a real download, and the cache when the hub is gone ----------------

_HUB_SCRIPT = """
import json, os, sys, time
from judge_service.errors import TokenizerError, UnavailableError
from judge_service.trace.tokenizer import TokenizerCache

out = {}
slow = TokenizerCache(allowed=["org/*"], load_timeout_s=0.5)
try:
    slow.get("org/tok")
except UnavailableError as exc:
    out["slow"] = exc.message
time.sleep(3.0)
out["later"] = slow.get("org/tok").vocab_size
try:
    TokenizerCache(allowed=["org/*"]).get("org/missing")
except TokenizerError as exc:
    out["missing"] = exc.message
os.environ["HF_ENDPOINT"] = sys.argv[1]  # the hub is gone now
out["cached"] = TokenizerCache(allowed=["org/*"]).get("org/tok").vocab_size
try:
    TokenizerCache(allowed=["org/*"]).get("org/other")
except UnavailableError as exc:
    out["gone"] = exc.message
try:
    TokenizerCache(allowed=["org/*"], offline=True).get("org/other")
except UnavailableError as exc:
    out["offline"] = exc.message
print(json.dumps(out))
"""


@pytest.mark.slow
def test_hub_ids_download_and_then_load_from_the_cache_without_the_hub(
    bpe_dir: Path, tmp_path: Path
) -> None:
    # In a process of its own: the hub client reads HF_ENDPOINT and HF_HOME at import.
    with FakeHub({"org/tok": bpe_dir}, delay_s=0.1) as hub:
        env = {
            **os.environ,
            "HF_ENDPOINT": hub.url,
            "HF_HOME": str(tmp_path / "hf"),
            "PYTHONPATH": str(ROOT),
        }
        done = subprocess.run(
            [sys.executable, "-c", _HUB_SCRIPT, refused_url()],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert "still loading" in out["slow"]  # the caller got an answer at its deadline...
    assert out["later"] > 0  # ...while the load finished in its thread
    assert "cannot load" in out["missing"]
    assert out["cached"] == out["later"]  # no hub: loaded from the HF cache
    assert "did not answer" in out["gone"]
    assert "JUDGE_TOKENIZER_OFFLINE" in out["offline"]


def test_unavailable_carries_retry_after() -> None:
    error = UnavailableError("hub down", field="tokenizer", retry_after_s=7)
    moved = error.with_prefix("rollouts[2]")
    assert (moved.field, moved.retry_after_s, moved.status_code) == (
        "rollouts[2].tokenizer",
        7,
        503,
    )


def test_a_loaded_listed_name_is_served_without_the_disk_and_a_root_name_is_not(
    tmp_path: Path,
) -> None:
    """A name admitted as written (default or listed) is served from the cache with no stat
    of its directory; one admitted for lying under a root is resolved every time, so once
    its directory is gone it is refused as before."""
    listed = build_byte_level_bpe(tmp_path / "listed")
    rooted = build_byte_level_bpe(tmp_path / "roots" / "rooted")
    policy = TokenizerPolicy(allowed=[str(listed)], roots=[str(tmp_path / "roots")])
    cache = TokenizerCache(policy=policy)
    first = cache.get(str(listed))
    assert cache.get(str(rooted)).vocab_size > 0
    shutil.rmtree(listed)
    shutil.rmtree(rooted)
    with (
        mock.patch.object(loading, "trusted_source", wraps=loading.trusted_source) as named,
        mock.patch.object(loading.os.path, "isdir", wraps=loading.os.path.isdir) as rooted_stat,
    ):
        assert cache.get(str(listed)) is first
        assert named.call_count == 0 and rooted_stat.call_count == 0  # nothing looked at
        with pytest.raises(TokenizerError, match="no tokenizer directory"):
            cache.get(str(rooted), "rollout.tokenizer")
        assert rooted_stat.call_count == 1
