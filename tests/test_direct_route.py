"""A small valid JSON body reaches the endpoint without FastAPI's request handler
(`api/direct.py`); what the caller sees must not depend on which path it took. Each case
is sent to two apps over real HTTP: one as served, one with a dependency override of a
function nothing uses (FastAPI then answers every request itself: `direct` steps aside
when overrides are set), and both answers are compared."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastapi.routing
import httpx
import pytest

from judge_service.api.app import create_app
from judge_service.config import Settings
from tests.conftest import LiveServer

KEY = "direct-route-key-0001"
TEXT = "<think>\n17 × 24 = 408.\n</think>\n\\boxed{408}"
TIMING = ("latency_ms", "queue_ms", "elapsed_ms")


def _unused() -> None:  # the override's target: no route depends on it
    return None


@pytest.fixture(scope="module")
def servers(bpe_dir: Path) -> Iterator[tuple[str, str]]:
    def settings() -> Settings:
        return Settings(default_tokenizer=str(bpe_dir), api_keys=KEY)  # type: ignore[arg-type]

    direct, fastapi_only = create_app(settings()), create_app(settings())
    fastapi_only.dependency_overrides[_unused] = _unused
    with LiveServer(direct) as one, LiveServer(fastapi_only) as other:
        yield one.url, other.url


@pytest.fixture()
def solved(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts FastAPI's dependency walks (its request handler's)."""
    calls: list[int] = []
    original = fastapi.routing.solve_dependencies

    async def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return await original(*args, **kwargs)

    monkeypatch.setattr(fastapi.routing, "solve_dependencies", counting)
    return calls


def _rollout(bpe_dir: Path) -> dict[str, Any]:
    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(str(bpe_dir)).encode(TEXT, add_special_tokens=False)
    return {"id": "r", "problem": "17 × 24?", "reference_answer": "408", "response_token_ids": ids}


def _post(url: str, body: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
    sent = {"content-type": "application/json", "authorization": f"Bearer {KEY}"}
    sent.update(headers or {})
    return httpx.post(url + "/v1/judge", content=body, headers=sent, timeout=60)


def _without_timing(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_timing(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [_without_timing(v) for v in value]
    return value


def _same(servers: tuple[str, str], body: bytes, headers: dict[str, str] | None = None) -> int:
    one, other = (_post(url, body, headers) for url in servers)
    assert one.status_code == other.status_code, (one.text, other.text)
    assert {k: v for k, v in one.headers.items() if k != "date"} == {
        k: v for k, v in other.headers.items() if k != "date"
    }
    assert _without_timing(one.json()) == _without_timing(other.json())
    return one.status_code


def test_a_valid_body_is_judged_without_fastapis_handler_and_as_by_it(
    servers: tuple[str, str], bpe_dir: Path, solved: list[int]
) -> None:
    body = json.dumps({"rollout": _rollout(bpe_dir), "options": {"use_cache": False}}).encode()
    direct, fastapi_only = servers
    assert _post(direct, body).status_code == 200
    assert solved == []  # the direct path
    assert _post(fastapi_only, body).status_code == 200
    assert solved == [1]  # FastAPI's own
    assert _same(servers, body) == 200
    charset = {"content-type": "application/json; charset=utf-8"}
    assert _same(servers, body, charset) == 200


def _edited(bpe_dir: Path, **changes: Any) -> dict[str, Any]:
    rollout = {**_rollout(bpe_dir), **changes}
    return {"rollout": {k: v for k, v in rollout.items() if v is not None}}


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"null",
        b"[]",
        b"{}",
        b"{not json",
        b'{"rollout": {"id": "r"}}',
        b'{"rollout": {"id": "r", "response_token_ids": [1], "reward": NaN}}',
        b'{"rollout": {"id": "r", "response_token_ids": [1], "reward": 1e400}}',
        b'{"rollout": {"id": "r", "response_token_ids": [1], "problem": "\\ud800"}}',
        b'{"rollout": {"id": "r\xff", "response_token_ids": [1]}}',
        b'\xef\xbb\xbf{"rollout": {"id": "r", "response_token_ids": [1]}}',
        '{"rollout": {"id": "r", "response_token_ids": [1]}}'.encode("utf-16"),
        b'{"rollout": {"id": "r", "response_token_ids": [1]}}\x00',
        b'{"rollout": {"id": "r", "response_token_ids": [true, "2", 3.0]}}',
        b'{"rollout": {"id": "r", "response_token_ids": [1], "response_mask": [true]}}',
        b'{"rollout": {"id": "r", "response_token_ids": [1], "extra": 1}}',
        b'{"rollout": {"id": "r", "response_token_ids": [1]}, "options": {"groupwise": true}}',
        b'{"rollout": {"id": "r", "id": "", "response_token_ids": [1]}}',
    ],
)
def test_every_other_body_gets_fastapis_answer(servers: tuple[str, str], raw: bytes) -> None:
    _same(servers, raw)


@pytest.mark.parametrize(
    "headers",
    [
        {"authorization": ""},
        {"authorization": "Bearer wrong"},
        {"authorization": f"Basic {KEY}"},
        {"content-type": "text/plain"},
        {"content-type": "application/vnd.judge+json"},
        {"content-type": ""},
    ],
)
def test_headers_decide_as_they_did(
    servers: tuple[str, str], bpe_dir: Path, headers: dict[str, str]
) -> None:
    """A missing or wrong key is 401 whatever the body (FastAPI's order: dependencies,
    then the body); a body that is not JSON by its content type is FastAPI's to judge."""
    valid = json.dumps(_edited(bpe_dir)).encode()
    invalid = json.dumps(_edited(bpe_dir, id="")).encode()
    for body in (valid, invalid):
        _same(servers, body, headers)


def test_input_errors_raised_by_the_endpoint_are_answered_by_the_apps_handlers(
    servers: tuple[str, str], bpe_dir: Path
) -> None:
    unknown = json.dumps(_edited(bpe_dir, tokenizer="not/a-known-tokenizer")).encode()
    assert 400 <= _same(servers, unknown) < 500
    masked = json.dumps(_edited(bpe_dir, response_mask=[1])).encode()  # too short
    assert _same(servers, masked) == 422
