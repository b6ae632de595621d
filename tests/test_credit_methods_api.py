"""The model-internal credit methods over real HTTP (a uvicorn server, an httpx client): the
value judge and CSCR/CoRT reweighting in /v1/judge and /v1/judge/batch, and their 4xx."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

pytest.importorskip("torch")

from judge_service.api.app import create_app
from judge_service.config import Settings
from tests.conftest import LiveServer
from tests.test_credit_methods import TEXT
from tests.test_probe_support import tiny_model_dir


@pytest.fixture(scope="module")
def model_dir() -> Path:
    return tiny_model_dir()


@pytest.fixture(scope="module")
def client(model_dir: Path) -> Iterator[httpx.Client]:
    settings = Settings(default_tokenizer=str(model_dir), allowed_scorer_models=[str(model_dir)])
    with LiveServer(create_app(settings)) as live, httpx.Client(base_url=live.url, timeout=60) as c:
        yield c


def _rollout(model_dir: Path, **extra: Any) -> dict[str, Any]:
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(model_dir))
    return {
        "id": "r1",
        "problem": "What is 17 × 24?",
        "response_token_ids": hf.encode(TEXT, add_special_tokens=False),
        "reference_answer": "408",
        "reward": 0.0,
        **extra,
    }


def test_value_judge_over_http(client: httpx.Client, model_dir: Path) -> None:
    body = {"rollout": _rollout(model_dir), "options": {"judge": f"value:{model_dir}"}}
    answer = client.post("/v1/judge", json=body)
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert result["judge"]["name"] == f"value:{model_dir}"
    assert len(result["spans"]) >= 5
    # The one segment grounding may drop: a rise of the value on the final answer of a
    # rollout whose verdict is wrong gets no positive credit.
    assert {r["code"] for r in result.get("rejected_spans") or []} <= {"wrong_final_answer"}
    scores = [s["score"] for s in result["spans"]]
    assert len(set(scores)) == len(scores)  # continuous, not the labels' fixed scores
    credit = np.asarray(result["credit"])
    for span in result["spans"]:  # λ = 0.25 by default; κ does not bind
        np.testing.assert_allclose(credit[span["start"] : span["end"]], 0.25 * span["score"])


def test_reweight_over_http(client: httpx.Client, model_dir: Path) -> None:
    rollouts = [
        _rollout(model_dir, id="a", group_id="g", reward=1.0, rubric="Multiplies correctly."),
        _rollout(model_dir, id="b", group_id="g", reward=0.0, rubric="Multiplies correctly."),
    ]
    for method in ("cscr", "cort"):
        options = {"reweight": f"{method}:{model_dir}", "credit_encoding": "base64-f32"}
        answer = client.post("/v1/judge/batch", json={"rollouts": rollouts, "options": options})
        assert answer.status_code == 200, answer.text
        for result, sign in zip(answer.json()["results"], (1, -1), strict=True):
            import base64

            def f32(payload: str) -> np.ndarray:
                return np.frombuffer(base64.b64decode(payload), "<f4").astype(np.float64)

            w, credit, advantage = (f32(result[k]) for k in ("weights", "credit", "advantage"))
            assert (w >= 0).all() and w.mean() == pytest.approx(1.0, abs=1e-5)
            np.testing.assert_allclose(advantage, sign * 0.5 * w + credit, atol=1e-5)


def test_cscr_results_carry_their_diagnostics(client: httpx.Client, model_dir: Path) -> None:
    rollouts = [
        _rollout(model_dir, id="a", group_id="g", reward=1.0, rubric="Multiplies correctly."),
        _rollout(model_dir, id="b", group_id="g", reward=None, rubric="Multiplies correctly."),
    ]
    options = {"reweight": f"cscr:{model_dir}", "reweight_options": {"condition": "verdict"}}
    answer = client.post("/v1/judge/batch", json={"rollouts": rollouts, "options": options})
    assert answer.status_code == 200, answer.text
    first, second = answer.json()["results"]
    for result, used in ((first, "correct"), (second, "mean")):
        found = result["reweight_diagnostics"]
        assert found["condition"] == "verdict" and found["condition_used"] == used
        assert 0.0 <= found["sign_reversal_share"] <= 1.0 and found["compared_tokens"] > 0
        assert found["mean_abs_shift_correct"] > 0 and found["mean_abs_difference"] > 0
    assert first["reweight_diagnostics"]["mean_abs_difference"] == pytest.approx(
        second["reweight_diagnostics"]["mean_abs_difference"]  # the same response and prompts
    )
    cort = {"reweight": f"cort:{model_dir}"}
    answer = client.post("/v1/judge/batch", json={"rollouts": rollouts, "options": cort})
    assert all("reweight_diagnostics" not in r for r in answer.json()["results"])
    bad = {"reweight": f"cscr:{model_dir}", "reweight_options": {"condition": "correct"}}
    answer = client.post("/v1/judge", json={"rollout": rollouts[0], "options": bad})
    assert answer.status_code == 422 and "condition" in answer.text


def test_bad_method_requests_name_the_field(client: httpx.Client, model_dir: Path) -> None:
    cases = [
        ({"reweight": f"cort:{model_dir}"}, "rollout.rubric"),
        ({"reweight": "cscr:/somewhere/else"}, "options.reweight"),
        ({"judge": "value:/somewhere/else"}, "options.judge"),
        ({"reweight": f"cscr:{model_dir}", "reweight_options": {"max_weight": 0.5}}, None),
    ]
    for options, field in cases:
        answer = client.post("/v1/judge", json={"rollout": _rollout(model_dir), "options": options})
        assert answer.status_code == 422, answer.text
        if field is not None:
            assert answer.json()["field"] == field
        else:
            assert "reweight_options" in answer.text
    no_reference = _rollout(model_dir, reference_answer=None)
    answer = client.post(
        "/v1/judge", json={"rollout": no_reference, "options": {"judge": f"value:{model_dir}"}}
    )
    assert answer.status_code == 422 and answer.json()["field"] == "rollout.reference_answer"


def test_credit_without_a_response_refuses_a_reweight(
    client: httpx.Client, model_dir: Path
) -> None:
    body = {"num_tokens": 4, "spans": [], "options": {"reweight": f"cscr:{model_dir}"}}
    answer = client.post("/v1/credit", json=body)
    assert answer.status_code == 422 and answer.json()["field"] == "options.reweight"
