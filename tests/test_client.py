"""judge_service.client against a real server (uvicorn in a thread, the rules judge, the
bundled examples), and against a scripted HTTP server for the faults: batches split over
the server's limit in order, 429/503 retried as retry-after says, 4xx never retried and
named, jobs followed to their last page, and results turned into numpy arrays."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from judge_service.api.app import create_app
from judge_service.client import (
    AsyncJudgeClient,
    InvalidRequestError,
    JobTimeoutError,
    JudgeClient,
    RateLimitError,
    RequestTooLargeError,
    RetryPolicy,
    ServiceUnavailableError,
    TransportError,
    credit_array,
    to_padded,
)
from judge_service.client.wire import judge_share, retry_after
from judge_service.config import Settings
from judge_service.schemas import BatchResponse, Options, Result, Rollout
from tests.client_support import CountingTransport, Fault, fault_server
from tests.conftest import EXAMPLES, LiveServer

LIMIT = 3  # the server's rollouts per batch


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    settings = Settings(max_rollouts_per_batch=LIMIT, tokenizer_roots=[str(EXAMPLES)])
    with LiveServer(create_app(settings)) as live:
        yield live.url


@pytest.fixture
def rollouts(example_rollouts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [dict(r) for r in example_rollouts]


def test_importing_the_client_loads_no_server_dependency() -> None:
    code = (
        "import sys, judge_service.client, judge_service.client.arrays;"
        "print(sorted(m for m in ('transformers', 'fastapi', 'torch', 'starlette', 'tokenizers',"
        " 'uvicorn') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_judge_returns_the_servers_model(server: str, rollouts: list[dict[str, Any]]) -> None:
    with JudgeClient(server) as client:
        from_dict = client.judge(rollouts[1])
        from_model = client.judge(Rollout.model_validate(rollouts[1]), Options(lambda_=0.5))
    assert isinstance(from_dict, Result) and from_dict.status == "ok"
    assert from_dict.num_tokens == len(rollouts[1]["response_token_ids"])
    assert from_dict.spans and from_dict.spans == from_model.spans
    # the alias `lambda` went over the wire: twice the credit
    assert np.allclose(credit_array(from_model), 2 * credit_array(from_dict))


def test_batch_is_split_over_the_limit_in_order(
    server: str, rollouts: list[dict[str, Any]]
) -> None:
    transport = CountingTransport()
    seven = rollouts[:7]
    with JudgeClient(server, max_batch=LIMIT, transport=transport) as client:
        batch = client.judge_batch(seven)
    assert [r.id for r in batch.results] == [r["id"] for r in seven]
    assert transport.sent == [("POST", "/v1/judge/batch")] * 3
    assert batch.stats.counts == {"ok": 7, "fallback": 0, "failed": 0}
    assert all(
        r.num_tokens == len(s["response_token_ids"])
        for r, s in zip(batch.results, seven, strict=True)
    )


@pytest.mark.parametrize("encoding", ["dense", "spans", "base64-f32"])
def test_share_of_a_split_batch_is_the_servers_formula(
    server: str, rollouts: list[dict[str, Any]], encoding: str
) -> None:
    """The judge's share of a batch sent in parts is recomputed from the results; on one
    part it must equal what the server reports."""
    with JudgeClient(server) as client:
        one = client.judge_batch(rollouts[:3], {"credit_encoding": encoding})
    assert one.stats.judge_share is not None
    assert judge_share(one.results) == pytest.approx(one.stats.judge_share, rel=1e-6)


def test_a_4xx_is_not_retried_and_names_the_field(
    server: str, rollouts: list[dict[str, Any]]
) -> None:
    transport = CountingTransport()
    with JudgeClient(server, transport=transport) as client:  # max_batch 1024 > the limit
        with pytest.raises(RequestTooLargeError) as too_large:
            client.judge_batch(rollouts[:5])
        bad = dict(rollouts[0], response_token_ids="not ids")
        with pytest.raises(InvalidRequestError) as invalid:
            client.judge(bad)
    assert too_large.value.status_code == 413 and too_large.value.field == "rollouts"
    assert invalid.value.status_code == 422
    assert invalid.value.field == "rollout.response_token_ids"
    assert "rollout.response_token_ids" in str(invalid.value)
    assert len(transport.sent) == 2  # one each: no retry


@pytest.mark.parametrize("status", [429, 503])
def test_429_and_503_are_retried_after_retry_after(
    server: str, rollouts: list[dict[str, Any]], status: int
) -> None:
    script = [Fault(status, {"retry-after": "1"})]
    with fault_server(server, script) as fake, JudgeClient(fake.url) as client:
        result = client.judge(rollouts[0])
    assert result.status == "ok" and result.id == rollouts[0]["id"]
    assert len(fake.seen) == 2
    assert fake.seen[1][0] - fake.seen[0][0] >= 1.0  # it waited what the server asked


def test_async_client_retries_and_splits(server: str, rollouts: list[dict[str, Any]]) -> None:
    script = [Fault(503, {"retry-after": "0"}), Fault(429, {"retry-after": "0"})]

    async def run(url: str) -> BatchResponse:
        async with AsyncJudgeClient(url, max_batch=2) as client:
            return await client.judge_batch(rollouts[:5])

    with fault_server(server, script) as fake:
        batch = asyncio.run(run(fake.url))
    assert [r.id for r in batch.results] == [r["id"] for r in rollouts[:5]]
    assert len(fake.seen) == 3 + 2  # three parts, two of the sends answered by faults


def test_retries_are_bounded(server: str, rollouts: list[dict[str, Any]]) -> None:
    always = [
        Fault(503, {"retry-after": "0"}, b'{"detail": "tokenizer: hub down", "field": "tokenizer"}')
    ] * 10
    with (
        fault_server(server, always) as fake,
        JudgeClient(fake.url, retry=RetryPolicy(max_attempts=3)) as client,
    ):
        with pytest.raises(ServiceUnavailableError) as exc:
            client.judge(rollouts[0])
        assert len(fake.seen) == 3
    assert exc.value.field == "tokenizer" and exc.value.status_code == 503
    # a wait beyond the budget is not begun: one send, the error at once
    with (
        fault_server(server, [Fault(429, {"retry-after": "3600"})]) as fake,
        JudgeClient(fake.url, retry=RetryPolicy(max_wait_s=10)) as client,
    ):
        with pytest.raises(RateLimitError) as limited:
            client.judge(rollouts[0])
        assert len(fake.seen) == 1
    assert limited.value.retry_after == 3600


def test_retry_after_forms() -> None:
    request = httpx.Request("GET", "http://x/")
    seconds = httpx.Response(503, headers={"retry-after": "2"}, request=request)
    date = httpx.Response(
        503, headers={"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, request=request
    )
    junk = httpx.Response(503, headers={"retry-after": "soon"}, request=request)
    assert retry_after(seconds) == 2.0
    assert retry_after(date) == 0.0  # a date in the past: at once
    assert retry_after(junk) is None
    policy = RetryPolicy(backoff_s=0.5)
    assert policy.delay(junk, 1, 0.0) == 0.5 and policy.delay(junk, 2, 0.0) == 1.0
    assert policy.delay(httpx.Response(400, request=request), 1, 0.0) is None


def test_a_dropped_connection_is_sent_again_and_a_job_made_once(
    server: str, rollouts: list[dict[str, Any]]
) -> None:
    # The first submission reaches the server, which makes the job, but its answer is
    # lost with the connection; the client sends it again, with the same idempotency key,
    # and gets that same job, not a second one. A connection dropped before the server
    # saw the request is sent again too.
    script = [Fault(0, drop=True, relayed=True), Fault(0, drop=True)]
    with fault_server(server, script) as proxy, JudgeClient(proxy.url) as client:
        job = client.submit_job(rollouts[:2])
        polled = client.get_job(job.id)
    (lost,) = proxy.dropped
    assert job.id == httpx.Response(202, content=lost).json()["id"]
    assert polled.counts.total == 2
    assert [m for _t, m, _p in proxy.seen] == ["POST", "POST", "POST", "GET"]
    # Not after a timeout: the server may still be working on it.
    policy = RetryPolicy()
    assert policy.dropped(httpx.ReadTimeout("slow"), 1, 0.0) is None
    assert policy.dropped(httpx.RemoteProtocolError("gone"), 1, 0.0) == policy.backoff_s
    assert policy.dropped(httpx.ConnectError("refused"), policy.max_attempts, 0.0) is None


def test_no_server_is_a_transport_error() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with (
        JudgeClient(f"http://127.0.0.1:{port}", timeout=5) as client,
        pytest.raises(TransportError),
    ):
        client.judge({"id": "x", "response_token_ids": [1]})


def test_jobs_submit_wait_and_page_by_cursor(server: str, rollouts: list[dict[str, Any]]) -> None:
    transport = CountingTransport()
    with JudgeClient(server, transport=transport) as client:
        job = client.submit_job(rollouts[:5], {"credit_encoding": "base64-f32"})
        view = client.wait_job(job.id, timeout=60, poll_s=0.1)
        results = list(client.iter_results(job.id, page_size=2))
    assert view.status == "done" and view.counts.done == 5
    assert [r.id for r in results] == [r["id"] for r in rollouts[:5]]
    pages = [path for method, path in transport.sent if path.endswith("/results")]
    assert len(pages) == 3  # 2 + 2 + 1, following next_cursor
    assert all(isinstance(credit_array(r), np.ndarray) for r in results)


def test_async_jobs(server: str, rollouts: list[dict[str, Any]]) -> None:
    async def run() -> tuple[str, list[str]]:
        async with AsyncJudgeClient(server) as client:
            job = await client.submit_job(rollouts[:4], idempotency_key="async-jobs")
            again = await client.submit_job(rollouts[:4], idempotency_key="async-jobs")
            assert again.id == job.id
            view = await client.wait_job(job.id, timeout=60, poll_s=0.1)
            ids = [r.id async for r in client.iter_results(job.id, page_size=3, poll_s=0.1)]
            return view.status, ids

    status, ids = asyncio.run(run())
    assert status == "done" and ids == [r["id"] for r in rollouts[:4]]


@pytest.fixture(scope="module")
def encoded(server: str, example_rollouts: list[dict[str, Any]]) -> dict[str, BatchResponse]:
    """The same three rollouts (a group with rewards: advantages too), in each encoding."""
    with JudgeClient(server) as client:
        return {
            enc: client.judge_batch(example_rollouts[:3], {"credit_encoding": enc})
            for enc in ("dense", "spans", "base64-f32")
        }


def test_credit_array_reads_every_encoding(encoded: dict[str, BatchResponse]) -> None:
    dense = [credit_array(r) for r in encoded["dense"].results]
    advantages = [credit_array(r, "advantage") for r in encoded["dense"].results]
    for encoding in ("spans", "base64-f32"):
        for result, credit, advantage in zip(
            encoded[encoding].results, dense, advantages, strict=True
        ):
            got = credit_array(result)
            assert got.dtype == np.float32 and got.shape == (result.num_tokens,)
            np.testing.assert_allclose(got, credit, rtol=1e-6)
            np.testing.assert_allclose(credit_array(result, "advantage"), advantage, rtol=1e-6)
    first = encoded["dense"].results[0]
    for span in first.spans:  # the credit is the span's score x lambda inside each span
        assert np.allclose(dense[0][span.start : span.end], 0.25 * span.score)


@pytest.mark.parametrize("encoding", ["dense", "spans", "base64-f32"])
def test_to_padded_both_sides(encoded: dict[str, BatchResponse], encoding: str) -> None:
    results = encoded[encoding].results
    rows = [credit_array(r) for r in results]
    sizes = [r.num_tokens for r in results]
    width = max(sizes) + 4
    right = to_padded(results, max_len=width)
    left = to_padded(results, max_len=width, padding_side="left")
    assert right.shape == left.shape == (3, width) and right.dtype == np.float32
    for i, (row, n) in enumerate(zip(rows, sizes, strict=True)):
        np.testing.assert_array_equal(right[i, :n], row)
        np.testing.assert_array_equal(right[i, n:], 0)
        np.testing.assert_array_equal(left[i, width - n :], row)
        np.testing.assert_array_equal(left[i, : width - n], 0)
    # lengths given: an appended EOS reads as a zero, a shorter row keeps its first values
    lengths = [sizes[0] + 1, sizes[1] - 2, sizes[2]]
    custom = to_padded(results, lengths=lengths, padding_side="left", field="advantage")
    assert custom.shape == (3, max(lengths))
    adv0 = credit_array(results[0], "advantage")
    np.testing.assert_allclose(custom[0, -lengths[0] : -1], adv0)
    assert custom[0, -1] == 0
    np.testing.assert_allclose(custom[1, -lengths[1] :], credit_array(results[1], "advantage")[:-2])


def test_to_padded_refuses_what_would_be_silently_wrong(encoded: dict[str, BatchResponse]) -> None:
    results = encoded["dense"].results
    with pytest.raises(ValueError, match="max_len"):
        to_padded(results, max_len=results[0].num_tokens - 1)
    with pytest.raises(ValueError, match="lengths"):
        to_padded(results, lengths=[1, 2])
    with pytest.raises(ValueError, match="padding_side"):
        to_padded(results, padding_side="middle")  # type: ignore[arg-type]
    failed = Result(id="f", status="failed", error="boom")
    padded = to_padded([results[0], failed])
    assert padded.shape == (2, results[0].num_tokens) and not padded[1].any()
    with pytest.raises(ValueError, match="failed"):
        credit_array(failed)
    with pytest.raises(ValueError, match="tokens"):
        credit_array({"id": "d", "status": "ok", "num_tokens": 3, "credit": [0.0, 1.0]})
    dicts = [r.model_dump() for r in results]  # plain dicts work too
    np.testing.assert_array_equal(to_padded(dicts), to_padded(results))


def test_wait_job_gives_up_after_its_timeout(server: str) -> None:
    running = (
        b'{"id": "j1", "status": "running", "created_at": 0, "counts": {"total": 1, '
        b'"queued": 0, "running": 1, "done": 0, "failed": 0, "cancelled": 0, '
        b'"dead_lettered": 0}}'
    )
    script = [Fault(200, body=running)] * 50
    with (
        fault_server(server, script) as fake,
        JudgeClient(fake.url) as client,
        pytest.raises(JobTimeoutError, match="still running"),
    ):
        client.wait_job("j1", timeout=0.3, poll_s=0.1)
    assert len(fake.seen) >= 2 and all(path == "/v1/jobs/j1" for _, _, path in fake.seen)


def test_iter_results_polls_a_page_not_ready_yet(
    server: str, rollouts: list[dict[str, Any]]
) -> None:
    with JudgeClient(server) as client:
        job = client.submit_job(rollouts[:2])
        client.wait_job(job.id, timeout=60, poll_s=0.1)
    # the first answer: nothing judged yet, come back with the same cursor
    script = [Fault(200, body=b'{"results": [], "next_cursor": "0"}')]
    with fault_server(server, script) as fake, JudgeClient(fake.url) as client:
        ids = [r.id for r in client.iter_results(job.id, poll_s=0.05)]
    assert ids == [r["id"] for r in rollouts[:2]]
    assert len(fake.seen) == 2 and "cursor=0" in fake.seen[1][2]


def test_credit_array_refuses_bad_base64() -> None:
    bad = {"id": "b", "status": "ok", "num_tokens": 1, "credit": "!!!!"}
    with pytest.raises(ValueError, match="base64"):
        credit_array(bad)
    short = {"id": "s", "status": "ok", "num_tokens": 2, "credit": "AAAAAA=="}
    with pytest.raises(ValueError, match="1 float32s for 2 tokens"):
        credit_array(short)


def test_both_base64_decoders_agree_and_the_fast_one_is_used() -> None:
    """pybase64 (a dependency) decodes; the stdlib fallback reads and refuses exactly the
    same strings, so a client without pybase64 is slower, never different."""
    from judge_service.client import arrays

    assert arrays.b64decode is arrays.B64_DECODERS["pybase64"]
    stdlib, fast = arrays.B64_DECODERS["stdlib"], arrays.B64_DECODERS["pybase64"]
    good = ["", "AAAAAA==", "AACAPwAAwH8AAIB/AACA/wAAAIA="]
    bad = ["!!!!", "AAAAAA", "AAAAAA=", "AAAA AAA=", "AAAA\nAAA=", "AAAAAA==AAAA", "=AAA", "AAAé"]
    for text in good:
        assert fast(text) == stdlib(text)
    for text in bad:
        for decode in (stdlib, fast):
            with pytest.raises(ValueError):  # binascii.Error is a ValueError
                decode(text)


def test_base64_rows_are_bit_exact_on_both_sides() -> None:
    """NaN payloads, infinities, -0.0 and subnormals survive the decode bit for bit, rows of
    different lengths land against the right edge, and the padding is zeros."""
    import base64

    rng = np.random.default_rng(7)
    special = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-45, 3.4e38], np.float32)
    rows = [rng.standard_normal(n).astype(np.float32) for n in (0, 5, 700, 1024)]
    rows[2][:6] = special
    rows[2].view(np.uint32)[6] = 0x7FA00001  # a NaN with a payload of its own
    results = [
        {"id": f"r{i}", "num_tokens": len(r), "credit": base64.b64encode(r.tobytes()).decode()}
        for i, r in enumerate(rows)
    ]
    for side in ("left", "right"):
        padded = to_padded(results, padding_side=side, max_len=1030)
        assert padded.shape == (4, 1030) and padded.dtype == np.float32
        for i, row in enumerate(rows):
            cells = padded[i, 1030 - len(row) :] if side == "left" else padded[i, : len(row)]
            rest = padded[i, : 1030 - len(row)] if side == "left" else padded[i, len(row) :]
            assert cells.view(np.uint32).tolist() == row.view(np.uint32).tolist()
            assert rest.view(np.uint32).tolist() == [0] * len(rest)  # +0.0, not -0.0
    assert credit_array(results[2]).view(np.uint32).tolist() == rows[2].view(np.uint32).tolist()


def test_without_pybase64_the_stdlib_decodes_and_says_so_once() -> None:
    """pybase64 missing at import (its import fails): one warning, and the same arrays."""
    code = (
        "import logging, sys, base64, numpy as np; logging.basicConfig(level='WARNING');"
        "sys.modules['pybase64'] = None;"
        "from judge_service.client import arrays, credit_array, to_padded;"
        "import judge_service.client.sync, judge_service.client.async_;"
        "v = np.arange(6, dtype=np.float32);"
        "r = {'id': 'r', 'num_tokens': 6, 'credit': base64.b64encode(v.tobytes()).decode()};"
        "assert sorted(arrays.B64_DECODERS) == ['stdlib'];"
        "assert (credit_array(r) == v).all() and (to_padded([r, r])[1] == v).all();"
        "print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"
    assert out.stderr.count("pybase64 is not installed") == 1


def test_async_client_without_a_server_is_a_transport_error() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    async def run() -> None:
        async with AsyncJudgeClient(f"http://127.0.0.1:{port}", timeout=5) as client:
            await client.get_job("j1")

    with pytest.raises(TransportError, match="GET /v1/jobs/j1"):
        asyncio.run(run())
