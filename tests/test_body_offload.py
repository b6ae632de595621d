"""Issue 10: a body of a megabyte or more is parsed and validated in a thread
(`api/routing.OffLoopBodyRoute`); what the caller sees must not depend on which path
its body took. Each case is sent twice over real HTTP, once small and once padded with
JSON whitespace past `OFFLOAD_BODY_BYTES`, and both answers are compared."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from judge_service.api.app import create_app
from judge_service.api.body import lone_surrogate
from judge_service.api.routing import OFFLOAD_BODY_BYTES
from judge_service.config import Settings
from tests.conftest import LiveServer

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
PAD = " " * (OFFLOAD_BODY_BYTES + 1024)


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    with LiveServer(create_app(Settings())) as server:
        yield server


def _example() -> dict[str, Any]:
    line = (EXAMPLES / "rollouts.jsonl").read_text(encoding="utf-8").splitlines()[0]
    rollout: dict[str, Any] = json.loads(line)
    rollout["tokenizer"] = str(EXAMPLES / "tokenizer")
    return rollout


def _padded(body: object) -> bytes:
    """`body` as JSON with a megabyte of insignificant whitespace before its last brace."""
    text = json.dumps(body)
    return (text[:-1] + PAD + text[-1]).encode()


def _post(url: str, path: str, body: bytes, content_type: str = "application/json") -> Any:
    return httpx.post(url + path, content=body, headers={"content-type": content_type}, timeout=60)


def test_a_large_valid_body_is_judged_as_a_small_one(live: LiveServer) -> None:
    rollout = _example()
    small = _post(live.url, "/v1/judge", json.dumps({"rollout": rollout}).encode())
    large_body = _padded({"rollout": rollout})
    assert len(large_body) > OFFLOAD_BODY_BYTES
    large = _post(live.url, "/v1/judge", large_body)
    assert small.status_code == large.status_code == 200
    assert large.json()["id"] == rollout["id"]
    assert large.json()["credit"] == small.json()["credit"]


@pytest.mark.parametrize(
    ("path", "broken", "field"),
    [
        # A bad field deep in the body.
        (
            "/v1/judge/batch",
            lambda r: {"rollouts": [r, {**r, "response_token_ids": ["a"]}]},
            "rollouts[1].response_token_ids[0]",
        ),
        ("/v1/judge", lambda r: {"rollout": {**r, "surprise": 1}}, "rollout.surprise"),
        (
            "/v1/credit",
            lambda r: {"num_tokens": -1, "spans": [], "options": {"note": r}},
            "num_tokens",
        ),
        ("/v1/jobs", lambda r: {"rollouts": [{**r, "id": 7}]}, "rollouts[0].id"),
    ],
)
def test_a_large_invalid_body_names_the_same_field(
    live: LiveServer, path: str, broken: Any, field: str
) -> None:
    small = _post(live.url, path, json.dumps(broken(_example())).encode())
    large = _post(live.url, path, _padded(broken(_example())))
    assert small.status_code == large.status_code == 422
    assert small.json()["field"] == large.json()["field"]
    assert large.json()["field"].startswith(field.split("[")[0].split(".")[0])
    assert field in large.json()["detail"] or large.json()["field"] == field


def test_large_malformed_json_is_the_same_422_as_small(live: LiveServer) -> None:
    small = _post(live.url, "/v1/judge", b'{"rollout": {"id": "a",}')
    large = _post(live.url, "/v1/judge", b'{"rollout": {"id": "a",' + PAD.encode() + b"}")
    assert small.status_code == large.status_code == 422
    assert "JSON decode error" in small.json()["detail"]
    assert "JSON decode error" in large.json()["detail"]


def test_a_large_body_of_another_content_type_is_not_parsed_as_json(live: LiveServer) -> None:
    """FastAPI's rule (only application/json or +json is JSON) holds on the thread path."""
    body = _padded({"rollout": _example()})
    small = _post(live.url, "/v1/judge", b'{"rollout": {}}', content_type="text/plain")
    large = _post(live.url, "/v1/judge", body, content_type="text/plain")
    assert small.status_code == large.status_code == 422
    assert large.json()["field"] == small.json()["field"]
    vendor = _post(live.url, "/v1/judge", body, content_type="application/vnd.judge+json")
    assert vendor.status_code == 200


@pytest.mark.parametrize(
    ("body", "at"),
    [
        (b'"\\ud800"', 1),  # a high half alone
        (b'"\\udc00"', 1),  # a low half alone
        (b'"ok \\ud83d\\ude00 \\udc00"', 17),  # a pair, then a low half alone
        (b'"\\ud83d\\ude00"', None),  # a pair: an emoji as json.dumps escapes it
        (b'"\\\\ud800"', None),  # an escaped backslash, then the letters ud800
        (b'"\\\\\\ud800"', 3),  # an escaped backslash, then an escape
        (b'"\\u00e9 \\uD7FF"', None),
    ],
)
def test_lone_surrogate_escapes_are_found_exactly(body: bytes, at: int | None) -> None:
    assert lone_surrogate(body) == at
    decoded = json.loads(body)
    has_lone = any(0xD800 <= ord(c) <= 0xDFFF for c in decoded)
    assert has_lone is (at is not None)


@pytest.mark.parametrize(
    "value",
    [b'"\\ud800"', b"NaN", b"1e400", b"99999999999999999999999"],
)
def test_what_yajl_reads_differently_is_still_a_422(live: LiveServer, value: bytes) -> None:
    """A lone surrogate (yajl would make it "?"), NaN, an overflowing float or integer:
    the small path names the field, the large one the body; neither is accepted."""
    rollout = json.dumps(_example())
    body = b'{"rollout": ' + rollout[:-1].encode() + b', "problem": ' + value + b"}}"
    small = _post(live.url, "/v1/judge", body)
    large = _post(live.url, "/v1/judge", body[:-1] + PAD.encode() + b"}")
    assert small.status_code == 422 and large.status_code == 422
    # FastAPI's path parses these and pydantic names the field; the chunked path (which
    # is what this proves was taken for the large body) refuses the body itself.
    assert small.json()["field"] == "rollout.problem"
    assert large.json()["field"] == "body"
