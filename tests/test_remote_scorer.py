"""The remote scorer backend (``vllm:<model>@<url>``) against a scripted server in vLLM's
wire format on loopback (real HTTP), whose log-probs come from the same tiny model the
local backend loads: both backends give the same numbers, through the Engine too."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

torch = pytest.importorskip("torch")

from judge_service import credit as credit_mod  # noqa: E402
from judge_service.config import Settings  # noqa: E402
from judge_service.errors import InputError, RemoteScorerError  # noqa: E402
from judge_service.methods.models import MODELS, check_model  # noqa: E402
from judge_service.methods.remote import RemoteScorer, parse_remote_spec  # noqa: E402
from judge_service.methods.rescoring import response_logprobs  # noqa: E402
from judge_service.pipeline import Engine  # noqa: E402
from judge_service.probe.endings import ENDING_FAMILIES, encode_suffix  # noqa: E402
from judge_service.schemas import Options, Result, Rollout  # noqa: E402
from judge_service.store import open_store  # noqa: E402
from tests.conftest import LiveServer  # noqa: E402
from tests.test_probe_support import tiny_model_dir  # noqa: E402

TEXT = (
    "<think>\nWe need 17 × 24.\n17 × 20 = 340.\n\n17 × 4 = 68.\n"
    "340 + 68 = 408.\n</think>\nThe answer is \\boxed{408}."
)


def vllm_app(model_dir: Path, seen: list[dict[str, Any]]) -> Any:
    """POST /v1/completions as vLLM answers it with prompt_logprobs, from the tiny model."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    app = FastAPI()

    @app.post("/v1/completions")
    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        seen.append(body)
        if body.get("model") != str(model_dir):
            return JSONResponse({"error": {"message": "model not found"}}, status_code=404)
        prompts = body["prompt"]
        prompts = prompts if isinstance(prompts[0], list) else [prompts]
        choices = []
        for index, ids in enumerate(prompts):
            with torch.inference_mode():
                logits = model(input_ids=torch.tensor([ids])).logits[0].float()
            logprobs = torch.log_softmax(logits, dim=-1)
            entries: list[dict[str, Any] | None] = [None]
            for j in range(1, len(ids)):
                row = logprobs[j - 1]
                token = ids[j]
                rank = int((row > row[token]).sum()) + 1
                entries.append(
                    {
                        str(token): {
                            "logprob": float(row[token]),
                            "rank": rank,
                            "decoded_token": tokenizer.decode([token]),
                        }
                    }
                )
            nxt = int(logprobs[-1].argmax())
            choices.append(
                {
                    "index": index,
                    "text": tokenizer.decode([nxt]),
                    "logprobs": None,
                    "finish_reason": "length",
                    "stop_reason": None,
                    "prompt_logprobs": entries,
                }
            )
        usage = {"prompt_tokens": sum(len(p) for p in prompts), "completion_tokens": len(prompts)}
        return JSONResponse(
            {
                "id": "cmpl-1",
                "object": "text_completion",
                "created": 0,
                "model": body["model"],
                "choices": choices[::-1],  # out of order: the client must read `index`
                "usage": {**usage, "total_tokens": sum(usage.values())},
            }
        )

    @app.post("/broken/v1/completions")
    async def broken(request: Request) -> JSONResponse:
        return JSONResponse({"choices": [{"index": 0, "text": "x", "logprobs": None}]})

    @app.post("/down/v1/completions")
    async def down(request: Request) -> JSONResponse:
        return JSONResponse({"error": {"message": "engine dead"}}, status_code=500)

    return app


@pytest.fixture(scope="module")
def model_dir() -> Path:
    return tiny_model_dir()


@pytest.fixture(scope="module")
def server(model_dir: Path) -> Iterator[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    with LiveServer(vllm_app(model_dir, seen)) as live:
        yield {"url": live.url, "seen": seen}


@pytest.fixture(scope="module")
def specs(model_dir: Path, server: dict[str, Any]) -> dict[str, str]:
    return {"local": str(model_dir), "remote": f"vllm:{model_dir}@{server['url']}/v1"}


@pytest.fixture(scope="module")
def settings(model_dir: Path, specs: dict[str, str]) -> Settings:
    return Settings(
        default_tokenizer=str(model_dir), allowed_scorer_models=[specs["local"], "vllm:*"]
    )


def _rollout(model_dir: Path) -> Rollout:
    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(str(model_dir)).encode(TEXT, add_special_tokens=False)
    return Rollout.model_validate(
        {
            "id": "r1",
            "problem": "What is 17 × 24?",
            "response_token_ids": ids,
            "reference_answer": "408",
            "reward": 1.0,
            "rubric": "Shows the partial products.",
        }
    )


def test_spec_parsing_and_the_allow_list(specs: dict[str, str]) -> None:
    model, url = parse_remote_spec(specs["remote"]) or ("", "")
    assert model == specs["local"] and url.endswith("/v1") and url.startswith("http://127.0.0.1")
    assert parse_remote_spec("HuggingFaceTB/SmolLM2-135M") is None
    with pytest.raises(ValueError, match="vllm:<model>@"):
        parse_remote_spec("vllm:model-without-url")
    with pytest.raises(InputError) as caught:
        check_model(specs["remote"], Settings(allowed_scorer_models=[specs["local"]]), "x")
    assert caught.value.field == "x"  # a URL is the operator's to allow, not the caller's


def test_same_numbers_as_the_local_backend(
    specs: dict[str, str], settings: Settings, server: dict[str, Any]
) -> None:
    local = MODELS.get(specs["local"], settings)
    remote = MODELS.get(specs["remote"], settings)
    assert isinstance(remote.scorer, RemoteScorer)
    hf = local.scorer.hf_tokenizer
    context = hf.encode("Q: 17 × 24?\n" + TEXT, add_special_tokens=False)
    suffixes = [
        encode_suffix(local.aligner.probe, ENDING_FAMILIES["think"].default, answer)
        for answer in ("408", "418")
    ]
    cuts = [1, 5, len(context) // 2, len(context)]
    mine = local.scorer.score_cuts(context, cuts, suffixes, chunk_size=7)
    theirs = remote.scorer.score_cuts(context, cuts, suffixes)
    np.testing.assert_allclose(theirs.logprob_sum, mine.logprob_sum, atol=1e-4)
    prompts = [hf.encode(p, add_special_tokens=False) for p in ("It is right.", "It is wrong!")]
    response = context[:20]
    np.testing.assert_allclose(
        response_logprobs(remote.scorer, prompts, response),
        response_logprobs(local.scorer, prompts, response),
        atol=1e-4,
    )
    body = server["seen"][-1]  # vLLM's request: token-id prompts, prompt_logprobs, 1 token
    assert body["model"] == specs["local"] and body["prompt_logprobs"] == 0
    assert body["max_tokens"] == 1 and all(isinstance(i, int) for i in body["prompt"][0])


def _judge(engine: Engine, rollout: Rollout, options: dict[str, Any]) -> Result:
    adv = credit_mod.advantage_in_group(rollout.reward, [1.0, 0.0], reward_field="reward")
    return asyncio.run(engine.judge_one(rollout, Options.model_validate(options), adv))


@pytest.mark.parametrize("method", ["value", "cscr", "cort"])
def test_methods_through_the_engine_match(
    settings: Settings, specs: dict[str, str], model_dir: Path, method: str
) -> None:
    engine = Engine(settings, store=open_store(settings))
    rollout = _rollout(model_dir)
    results = {}
    for where, spec in specs.items():
        key = "judge" if method == "value" else "reweight"
        options = {key: f"{method}:{spec}", "use_cache": False, "credit_encoding": "dense"}
        results[where] = _judge(engine, rollout, options)
        assert results[where].status == "ok", results[where].error
    local, remote = results["local"], results["remote"]
    if method == "value":
        assert [(s.start, s.end) for s in remote.spans] == [(s.start, s.end) for s in local.spans]
        for a, b in zip(remote.spans, local.spans, strict=True):
            assert a.score == pytest.approx(b.score, abs=1e-4)
    else:
        np.testing.assert_allclose(remote.weights, local.weights, atol=1e-3)
    np.testing.assert_allclose(remote.credit, local.credit, atol=1e-3)


def test_server_errors_are_clear(model_dir: Path, server: dict[str, Any]) -> None:
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(model_dir))
    for path, match in (("/down/v1", "answered 500"), ("/broken/v1", "prompt_logprobs format")):
        scorer = RemoteScorer(str(model_dir), server["url"] + path, hf)
        with pytest.raises(RemoteScorerError, match=match):
            scorer.prompt_logprobs([[1, 2, 3]])
    gone = RemoteScorer(str(model_dir), "http://127.0.0.1:9/v1", hf, timeout_s=2)
    with pytest.raises(RemoteScorerError, match=r"127\.0\.0\.1:9"):
        gone.prompt_logprobs([[1, 2]])
