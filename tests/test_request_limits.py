"""Issue 10: a request's cost is bounded before work starts. The body (its size while
it streams, chunked or not; its JSON depth) and /v1/credit (spans per call, custom
labels, the response's size, the event loop), over real HTTP."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from judge_service.api.app import create_app
from judge_service.api.json_limits import json_depth_exceeds
from judge_service.config import Settings
from tests.conftest import LiveServer


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    with LiveServer(create_app(Settings())) as server:
        yield server


@pytest.fixture(scope="module")
def small_body() -> Iterator[str]:
    with LiveServer(create_app(Settings(max_body_bytes=4096))) as server:
        yield server.url


def _spans(n: int, label: str = "invalid", **extra: Any) -> list[dict[str, Any]]:
    return [{"start": i, "end": i + 1, "label": label, **extra} for i in range(n)]


def test_credit_refuses_more_spans_than_the_limit_before_any_work(live: LiveServer) -> None:
    """30,000 one-token spans (1.5 MB) took 12-20 s with /healthz frozen; now a 413
    naming the field and the setting, as fast as the body can be read."""
    body = {"num_tokens": 30_000, "spans": _spans(30_000)}
    response = httpx.post(live.url + "/v1/credit", json=body, timeout=60)
    assert response.status_code == 422 and response.json()["field"] == "spans"
    assert "4096" in response.json()["detail"] and "JUDGE_MAX_SPANS" in response.json()["detail"]
    # Under the schema's ceiling, the server's own JUDGE_MAX_SPANS (256 by default).
    over = httpx.post(live.url + "/v1/credit", json={"num_tokens": 300, "spans": _spans(300)})
    assert over.status_code == 413 and over.json()["field"] == "spans"
    assert "256" in over.json()["detail"] and "JUDGE_MAX_SPANS" in over.json()["detail"]
    at = httpx.post(live.url + "/v1/credit", json={"num_tokens": 256, "spans": _spans(256)})
    assert at.status_code == 200


def test_credit_refuses_thousands_of_custom_labels(live: LiveServer) -> None:
    """4,000 labels and 4,000 spans of unknown labels made an 800 MB response."""
    labels = {f"label-{i}": 0.5 for i in range(4000)}
    body = {
        "num_tokens": 4000,
        "spans": _spans(4000, label="nope"),
        "options": {"label_scores": labels},
    }
    response = httpx.post(live.url + "/v1/credit", json=body, timeout=60)
    assert response.status_code == 422, response.text[:500]
    assert response.json()["field"] == "options.label_scores"
    assert "64" in response.json()["detail"] and len(response.content) < 2_000
    for bad in ({"x" * 65: 1.0}, {"": 1.0}):  # label names are bounded too
        options = {"label_scores": bad}
        refused = httpx.post(
            live.url + "/v1/credit", json={"num_tokens": 1, "spans": [], "options": options}
        )
        assert refused.status_code == 422
        assert refused.json()["field"].startswith("options.label_scores")


def test_the_largest_credit_request_allowed_answers_small(live: LiveServer) -> None:
    """The worst the bounds allow: JUDGE_MAX_SPANS spans, each of an unknown 64-character
    label with 64 KiB quotes (every one rejected, and echoed), beside 64 custom labels of
    64 characters. The rejections stay under 2 MB."""
    labels = {f"{i:02d}".ljust(64, "x"): 1.0 for i in range(64)}
    quote = "q" * 65_536
    body = {
        "num_tokens": 131_072,
        "spans": _spans(256, label="z" * 64, evidence=quote, evidence_end=quote),
        "options": {"label_scores": labels, "credit_encoding": "spans"},
        "reward": 1.0,
        "group_rewards": [1.0, 0.0],
    }
    response = httpx.post(live.url + "/v1/credit", json=body, timeout=60)
    assert response.status_code == 200
    data = response.json()
    assert len(data["rejected_spans"]) == 256
    assert {r["code"] for r in data["rejected_spans"]} == {"unknown_label"}
    assert len(response.content) < 2_000_000


def test_long_credit_work_runs_off_the_event_loop(
    live: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from judge_service.api.routes import credit as route

    seen: list[int] = []
    original = route._credit

    def spy(*args: Any) -> Any:
        seen.append(threading.get_ident())
        return original(*args)

    monkeypatch.setattr(route, "_credit", spy)
    for num_tokens in (100, 131_072):
        body = {"num_tokens": num_tokens, "spans": _spans(256)}
        assert httpx.post(live.url + "/v1/credit", json=body, timeout=30).status_code == 200
    assert seen[0] == live.thread.ident  # a short one: cheaper than a thread hop
    assert seen[1] != live.thread.ident  # 131k tokens: in a worker thread


def test_a_chunked_body_over_the_limit_is_a_413(small_body: str) -> None:
    """Chunked (no Content-Length) over JUDGE_MAX_BODY_BYTES used to be a 400 "error
    parsing the body": the count raised inside FastAPI's parser."""
    sent = 0

    def chunks() -> Iterator[bytes]:
        nonlocal sent
        yield b'{"num_tokens": 1, "spans": [], "pad": "'
        for _ in range(64):
            sent += 1024
            yield b"x" * 1024
        yield b'"}'

    response = httpx.post(
        small_body + "/v1/credit",
        content=chunks(),
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert response.status_code == 413
    assert response.json()["field"] == "body"
    assert "4096" in response.json()["detail"] and "JUDGE_MAX_BODY_BYTES" in response.text
    # Under the limit, chunked is fine.
    fine = httpx.post(
        small_body + "/v1/credit",
        content=iter([b'{"num_tokens": 2, ', b'"spans": []}']),
        headers={"content-type": "application/json"},
    )
    assert fine.status_code == 200 and fine.json()["credit"] == [0.0, 0.0]


def test_a_declared_huge_body_is_refused_before_it_is_sent(live: LiveServer) -> None:
    """Default settings, a declared 100 MiB body: the 413 arrives while not one byte of
    the body has been sent (it used to be read, parsed, and cost ~850 MB first)."""
    with socket.create_connection(("127.0.0.1", live.port), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/credit HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\n"
            + f"content-length: {100 * 1024 * 1024}\r\n\r\n".encode()
        )
        answer = b""
        while b"JUDGE_MAX_BODY_BYTES" not in answer:
            data = sock.recv(4096)  # times out (a failure) if the server waits for the body
            assert data, f"connection closed: {answer!r}"
            answer += data
    assert answer.startswith(b"HTTP/1.1 413")
    assert b'"field": "body"' in answer


def test_deeply_nested_json_is_a_422_naming_the_body(live: LiveServer) -> None:
    """100,000 levels were a RecursionError inside the JSON parser."""
    for deep in (b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 65 + b"1" + b"}" * 65):
        response = httpx.post(
            live.url + "/v1/credit",
            content=deep,
            headers={"content-type": "application/json"},
            timeout=30,
        )
        assert response.status_code == 422, response.text[:300]
        assert response.json()["field"] == "body" and "64" in response.json()["detail"]
    # Brackets inside strings do not count, escaped quotes included.
    text = 'say \\"[[[[\\" and ' + "[" * 1000
    ok = {"num_tokens": 1, "spans": [{"start": 0, "end": 1, "label": "invalid", "evidence": text}]}
    assert httpx.post(live.url + "/v1/credit", json=ok).status_code == 200


@pytest.mark.parametrize(
    ("body", "deeper_than_3"),
    [
        (b'{"a": [1, {"b": "[[[[[["}]}', False),
        (b'{"a": [1, {"b": [[]]}]}', True),
        (b'{"a": "\\\\", "b": [[[1]]]}', True),  # an escaped backslash, then a real quote
        (b'{"a": "\\" [[[[ \\"", "b": 1}', False),  # escaped quotes stay inside the string
        (b'{"a": "\\\\\\" [[[[ "}', False),
        (b"[" * 4 + b"]" * 4, True),
        (b"[[[]]]", False),
    ],
)
def test_the_depth_scan_reads_strings_and_escapes(body: bytes, deeper_than_3: bool) -> None:
    assert json_depth_exceeds(body, 3) is deeper_than_3
    json.loads(body)  # each is valid JSON


def _depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


@pytest.mark.parametrize("shift", [-3, -2, -1, 0, 1, 2])
def test_the_depth_scan_is_exact_across_its_slices(shift: int) -> None:
    """The scan reads a megabyte at a time: a string, its escaped quotes and a run of
    backslashes that straddle a slice boundary must read as they do in one piece."""
    pad = (1 << 20) - 12 + shift
    text = "x" * pad + '\\\\\\" [[[[[[ \\\\'  # backslash runs and a quote at the seam
    for nest in (2, 3):
        body = json.dumps({"a": text, "b": [[[1]]] if nest == 3 else [[1]]}).encode()
        assert len(body) > 1 << 20
        assert json_depth_exceeds(body, 3) is (_depth(json.loads(body)) > 3)
