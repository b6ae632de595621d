"""`response_mask` over real HTTP with the rules judge: the judge sees every token (same
spans, same cache entry), credit and advantage are 0 where the mask is 0 and unchanged
elsewhere, and a mask of the wrong length is refused naming `response_mask`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from judge_service.api.app import create_app
from judge_service.client import InvalidRequestError, JudgeClient, credit_array
from judge_service.config import Settings
from tests.conftest import EXAMPLES, LiveServer


@pytest.fixture(scope="module")
def client() -> Iterator[JudgeClient]:
    settings = Settings(tokenizer_roots=[str(EXAMPLES)])
    with LiveServer(create_app(settings)) as live, JudgeClient(live.url) as c:
        yield c


@pytest.fixture
def rollout(example_rollouts: list[dict[str, Any]]) -> dict[str, Any]:
    # mul-error-corrected: an invalid step, a correction and valid progress spread over it
    found = next(r for r in example_rollouts if r["id"] == "mul-error-corrected")
    return dict(found)


def _tool_output_mask(n: int) -> list[int]:
    """A multi-turn layout: tokens 30..49 came from a tool, not the policy."""
    return [0 if 30 <= t < 50 else 1 for t in range(n)]


@pytest.mark.parametrize("encoding", ["dense", "spans", "base64-f32"])
def test_masked_tokens_get_no_credit_and_the_judge_sees_them(
    client: JudgeClient, rollout: dict[str, Any], encoding: str
) -> None:
    n = len(rollout["response_token_ids"])
    mask = _tool_output_mask(n)
    options = {"credit_encoding": encoding, "use_cache": False}
    plain = client.judge(rollout, options, group_rewards=[1.0, 0.0])
    masked = client.judge({**rollout, "response_mask": mask}, options, group_rewards=[1.0, 0.0])
    assert masked.spans == plain.spans  # the judge saw the masked tokens too
    assert any(s.start < 50 and s.end > 30 for s in plain.spans)  # a span crosses the mask
    keep = np.asarray(mask, bool)
    credit, full = credit_array(masked), credit_array(plain)
    assert full[~keep].any()  # there was credit to remove
    np.testing.assert_array_equal(credit[~keep], 0)
    np.testing.assert_array_equal(credit[keep], full[keep])
    advantage = credit_array(masked, "advantage")
    np.testing.assert_array_equal(advantage[~keep], 0)
    np.testing.assert_allclose(advantage[keep], full[keep] + 0.5, rtol=1e-6)


def test_the_mask_does_not_change_the_cached_judgment(
    client: JudgeClient, rollout: dict[str, Any]
) -> None:
    rollout = {**rollout, "id": "mask-cache", "problem": rollout["problem"] + " (mask cache)"}
    first = client.judge(rollout)
    masked = client.judge({**rollout, "response_mask": [0] * len(rollout["response_token_ids"])})
    assert first.cache == "miss" and masked.cache == "hit"
    assert masked.cache_key == first.cache_key
    assert not credit_array(masked).any() and credit_array(first).any()


def test_a_mask_of_the_wrong_length_is_refused(
    client: JudgeClient, rollout: dict[str, Any]
) -> None:
    n = len(rollout["response_token_ids"])
    with pytest.raises(InvalidRequestError) as exc:
        client.judge({**rollout, "response_mask": [1] * (n - 1)})
    assert exc.value.status_code == 422 and exc.value.field == "rollout.response_mask"
    assert f"{n - 1} entries for {n} response tokens" in exc.value.detail
    with pytest.raises(InvalidRequestError) as values:
        client.judge({**rollout, "response_mask": [2] * n})
    assert values.value.field == "rollout.response_mask[0]"


def test_in_a_batch_only_the_bad_mask_fails(client: JudgeClient, rollout: dict[str, Any]) -> None:
    n = len(rollout["response_token_ids"])
    good = {**rollout, "id": "good", "response_mask": [1] * n}
    bad = {**rollout, "id": "bad", "response_mask": [1] * (n + 3)}
    batch = client.judge_batch([good, bad, {**rollout, "id": "plain"}])
    statuses = {r.id: r.status for r in batch.results}
    assert statuses == {"good": "ok", "bad": "failed", "plain": "ok"}
    failed = batch.results[1]
    assert failed.error is not None and failed.error.startswith("rollouts[1].response_mask:")
    np.testing.assert_array_equal(credit_array(batch.results[0]), credit_array(batch.results[2]))


def test_a_job_keeps_the_mask(client: JudgeClient, rollout: dict[str, Any]) -> None:
    mask = _tool_output_mask(len(rollout["response_token_ids"]))
    job = client.submit_job([{**rollout, "response_mask": mask}])
    assert client.wait_job(job.id, timeout=60, poll_s=0.1).status == "done"
    (result,) = client.iter_results(job.id)
    credit = credit_array(result)
    keep = np.asarray(mask, bool)
    assert not credit[~keep].any() and credit[keep].any()
