"""Results written by orjson (judge_service/wire_json.py) are the JSON pydantic wrote before:
the same keys in the same order, the same values, every float bit for bit."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from judge_service.api.app import create_app
from judge_service.config import Settings
from judge_service.pipeline import Engine
from judge_service.schemas import BatchResponse, Options, RejectedSpan, Result, Rollout
from judge_service.wire_json import dump_json, dump_json_str
from tests.conftest import EXAMPLES, LiveServer


def _pairs(body: str | bytes) -> Any:
    """Decoded JSON with every object as its ordered list of pairs (key order compared)."""
    return json.loads(body, object_pairs_hook=list)


def _old(model: Result | BatchResponse) -> str:
    """The path before orjson: pydantic's model_dump_json, as json_response called it."""
    return model.model_dump_json(exclude_none=True)


def _floats(result: Result) -> list[float]:
    out: list[float] = []
    for name in ("credit", "advantage", "weights"):
        value = getattr(result, name)
        if isinstance(value, list) and value and isinstance(value[0], float):
            out.extend(value)
    return out


def _settings() -> Settings:
    return Settings(default_tokenizer=str(EXAMPLES / "tokenizer"), max_rollouts_per_batch=50)


@pytest.mark.parametrize("encoding", ["dense", "spans", "base64-f32"])
def test_examples_same_json_as_pydantic(
    example_rollouts: list[dict[str, Any]], encoding: str
) -> None:
    rollouts = [Rollout.model_validate(row) for row in example_rollouts]
    options = Options(credit_encoding=encoding)  # type: ignore[arg-type]
    response = asyncio.run(Engine(_settings()).judge_batch(rollouts, options))
    assert len(response.results) == len(example_rollouts)
    assert any(r.advantage is not None for r in response.results)  # groups with rewards

    new = dump_json(response)
    assert _pairs(new) == _pairs(_old(response))
    assert _pairs(dump_json_str(response)) == _pairs(_old(response))
    decoded = json.loads(new)["results"]
    for result, wire in zip(response.results, decoded, strict=True):
        assert _pairs(dump_json(result)) == _pairs(_old(result))
        if encoding == "dense" and result.status != "failed":
            sent = wire["credit"] + wire.get("advantage", [])
            assert len(sent) >= result.num_tokens > 0
            assert [x.hex() for x in sent] == [x.hex() for x in _floats(result)]


def test_floats_round_trip_bit_for_bit() -> None:
    tricky = [0.1 + 0.2, 1e-7, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, -0.0]
    tricky += [1 / 3, -2.5e-16, 123456789.12345679, 1e22, 1e16, 0.0, 1.0]
    result = Result(id="f", status="ok", num_tokens=len(tricky), credit=tricky)
    result.advantage = [math.nan, math.inf, -math.inf]  # what pydantic writes as null
    new, old = json.loads(dump_json(result)), json.loads(_old(result))
    assert new == old
    assert [x.hex() for x in new["credit"]] == [x.hex() for x in tricky]
    assert new["advantage"] == [None, None, None]


def test_what_orjson_refuses_is_written_by_pydantic() -> None:
    # An echoed rejected span is the client's JSON: an integer beyond 64 bits is legal.
    span = {"start": 2**70, "end": -(2**65), "label": "x"}
    result = Result(
        id="big",
        status="ok",
        rejected_spans=[RejectedSpan(span=span, code="out_of_range", reason="r")],
    )
    assert dump_json(result) == _old(result).encode()
    assert json.loads(dump_json(result))["rejected_spans"][0]["span"]["start"] == 2**70


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with LiveServer(create_app(_settings())) as live:
        yield live.url


def test_http_bodies_are_pydantics_json(
    server: str, example_rollouts: list[dict[str, Any]]
) -> None:
    """Through the real app: each body, read back into its model and written by pydantic,
    is the same JSON (so nothing the old path wrote is missing, added or reordered)."""
    options = {"use_cache": False}
    with httpx.Client(base_url=server, timeout=60) as client:
        batch = client.post(
            "/v1/judge/batch", json={"rollouts": example_rollouts, "options": options}
        )
        assert batch.status_code == 200, batch.text
        assert batch.headers["content-type"] == "application/json"
        model = BatchResponse.model_validate_json(batch.content)
        assert _pairs(batch.content) == _pairs(_old(model))
        assert [r["id"] for r in batch.json()["results"]] == [r["id"] for r in example_rollouts]
        for row in example_rollouts:
            body = {"rollout": row, "options": options, "group_rewards": [0.0, 1.0, 1.0]}
            if "reward" not in row:
                body.pop("group_rewards")
            one = client.post("/v1/judge", json=body)
            assert one.status_code == 200, one.text
            assert _pairs(one.content) == _pairs(_old(Result.model_validate_json(one.content)))
