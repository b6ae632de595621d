"""verl integration against verl's real functions (``pip install --no-deps verl`` plus the
light packages in the ``trainers`` extra): the ``judge_credit`` estimator registered and
found by ``get_adv_estimator_fn``, run through verl's own ``compute_advantage`` on a batch
laid out like verl's agent loop builds it (left-padded prompts, right-padded responses,
``response_mask``), and the reward manager judging over real HTTP with the rules judge."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("verl.trainer.ppo.core_algos")

from omegaconf import OmegaConf  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.config import AlgoConfig  # noqa: E402
from verl.trainer.ppo import core_algos  # noqa: E402
from verl.trainer.ppo import reward as verl_reward  # noqa: E402

from judge_service.api.app import create_app  # noqa: E402
from judge_service.client import JudgeClient, credit_array  # noqa: E402
from judge_service.config import Settings  # noqa: E402
from judge_service.integrations import verl as jv  # noqa: E402
from tests.conftest import EXAMPLES, LiveServer  # noqa: E402
from tests.readme_snippets import readme_block  # noqa: E402


def _compute_advantage(data: DataProto, config: AlgoConfig) -> torch.Tensor:
    """The ``else:`` branch of verl's ``compute_advantage`` (verl/trainer/ppo/ray_trainer.py,
    0.9.1), which every registered estimator goes through: the same kwargs, the same lookup.
    (ray_trainer itself imports verl's whole training stack, which CI does not install.)"""
    fn = core_algos.get_adv_estimator_fn("judge_credit")
    adv_kwargs = {
        "token_level_rewards": data.batch["token_level_rewards"],
        "response_mask": data.batch["response_mask"],
        "config": config,
    }
    if "uid" in data.non_tensor_batch:
        adv_kwargs["index"] = data.non_tensor_batch["uid"]
    advantages, returns = fn(**adv_kwargs)
    assert torch.equal(advantages, returns)
    return advantages


def _grpo(outcome: torch.Tensor, mask: torch.Tensor, uid: np.ndarray, norm: bool) -> torch.Tensor:
    """verl's own GRPO outcome estimator on the scalar rewards at the last valid token."""
    scalar = torch.zeros_like(mask, dtype=torch.float32)
    last = mask.shape[1] - 1 - mask.flip(-1).float().argmax(-1)
    scalar[torch.arange(len(outcome)), last] = outcome
    advantages, _ = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=scalar, response_mask=mask, index=uid, norm_adv_by_std_in_grpo=norm
    )
    return advantages


def _layout() -> tuple[torch.Tensor, np.ndarray, torch.Tensor, torch.Tensor]:
    """6 rows in 2 groups, width 10, right-padded (agent_loop.py _postprocess); row 2 is
    multi-turn (tool tokens at 3..5 have response_mask 0), row 5 fills the width (truncated)."""
    lengths = [7, 4, 9, 10, 2, 10]
    mask = torch.zeros(6, 10, dtype=torch.int64)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
    mask[2, 3:6] = 0
    uid = np.array(["a", "a", "a", "b", "b", "b"], dtype=object)
    outcome = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 0.5])
    credit = torch.randn(6, 10, generator=torch.Generator().manual_seed(0))
    return mask, uid, outcome, credit


def test_estimator_is_registered_and_is_grpo_plus_credit() -> None:
    assert core_algos.get_adv_estimator_fn("judge_credit") is jv.compute_judge_credit_advantage
    mask, uid, outcome, credit = _layout()
    rewards = jv.encode_token_rewards(outcome, credit, mask)
    for norm in (False, True):
        data = DataProto.from_dict(
            tensors={"token_level_rewards": rewards.clone(), "response_mask": mask},
            non_tensors={"uid": uid},
        )
        advantages = _compute_advantage(data, AlgoConfig(norm_adv_by_std_in_grpo=norm))
        kept = credit * mask
        last = mask.shape[1] - 1 - mask.flip(-1).float().argmax(-1)
        kept[torch.arange(6), last] = 0.0  # the documented cost of the encoding
        expected = _grpo(outcome, mask, uid, norm) + kept
        torch.testing.assert_close(advantages, expected, rtol=0, atol=1e-5)
        assert torch.all(advantages[mask == 0] == 0)
    # The encoding keeps each row's sum, so verl's stock GRPO still sees the outcome alone.
    stock, _ = core_algos.compute_grpo_outcome_advantage(
        rewards, mask, uid, norm_adv_by_std_in_grpo=False
    )
    torch.testing.assert_close(stock, _grpo(outcome, mask, uid, False), rtol=0, atol=1e-5)


def test_encoding_round_trip_and_shape_errors() -> None:
    mask, _, outcome, credit = _layout()
    got_outcome, got_credit = jv.decode_token_rewards(
        jv.encode_token_rewards(outcome, credit, mask), mask
    )
    torch.testing.assert_close(got_outcome, outcome, rtol=0, atol=1e-5)
    assert torch.all(got_credit[mask == 0] == 0)
    assert torch.equal(got_credit[0, :6], credit[0, :6])  # row 0: 7 tokens, slot at 6
    assert got_credit[0, 6] == 0
    with pytest.raises(ValueError, match="one \\(B, L\\) batch"):
        jv.encode_token_rewards(outcome[:3], credit, mask)


@pytest.fixture(scope="module")
def service() -> Iterator[str]:
    with LiveServer(create_app(Settings())) as live:
        yield live.url


def _score(data_source: str, solution_str: str, ground_truth: str, extra_info: Any) -> float:
    return 1.0 if ground_truth in solution_str else 0.0


def _verl_batch(rows: list[dict[str, Any]], tokenizer: Any, width: int) -> DataProto:
    """Tensors as verl's agent loop lays them out: prompts left-padded, responses cut to
    `width` (single_turn_agent_loop.py) and right-padded, masks to match."""
    prompts = [tokenizer(r["problem"])["input_ids"] for r in rows]
    plen = max(len(p) for p in prompts)
    n = len(rows)
    prompt_t = torch.zeros(n, plen, dtype=torch.int64)
    resp_t = torch.zeros(n, width, dtype=torch.int64)
    attention = torch.zeros(n, plen + width, dtype=torch.int64)
    for i, (p, r) in enumerate(zip(prompts, rows, strict=True)):
        ids = r["response_token_ids"][:width]
        prompt_t[i, plen - len(p) :] = torch.tensor(p)
        resp_t[i, : len(ids)] = torch.tensor(ids)
        attention[i, plen - len(p) : plen + len(ids)] = 1
    return DataProto.from_dict(
        tensors={
            "prompts": prompt_t,
            "responses": resp_t,
            "input_ids": torch.cat([prompt_t, resp_t], dim=1),
            "attention_mask": attention,
            "response_mask": attention[:, plen:].clone(),
        },
        non_tensors={
            "uid": np.array([r["group_id"] for r in rows], dtype=object),
            "data_source": np.array(["arith"] * n, dtype=object),
            "reward_model": np.array([{"ground_truth": r["reference_answer"]} for r in rows]),
        },
    )


def test_reward_manager_to_advantages_over_http(
    service: str, example_rollouts: list[dict[str, Any]]
) -> None:
    rows = [r for r in example_rollouts if r["group_id"] in ("mul", "lin")]
    tokenizer = AutoTokenizer.from_pretrained(str(EXAMPLES / "tokenizer"))
    width = 64  # two rows are longer: verl keeps their first 64 tokens
    batch = _verl_batch(rows, tokenizer, width)
    manager = jv.JudgeRewardManager(
        OmegaConf.create({}),
        tokenizer,
        _score,
        judge_url=service,
        judge_tokenizer=str(EXAMPLES / "tokenizer"),
    )
    outputs = [
        manager.loop.run_until_complete(manager.run_single(batch[i : i + 1]))
        for i in range(len(rows))
    ]
    # What verl's RewardLoopManager.compute_rm_score does with them (reward_loop.py).
    scores = [o["reward_score"] for o in outputs]
    infos = [o["reward_extra_info"] for o in outputs]
    batch.batch["rm_scores"] = jv.JudgeRewardManager.assemble_rm_scores(batch, scores)
    keys = list(infos[0])
    for key in keys:
        batch.non_tensor_batch[key] = np.array([info[key] for info in infos])
    batch.meta_info["reward_extra_keys"] = keys
    assert set(batch.non_tensor_batch["judge_status"]) <= {"ok", "fallback"}

    reward_tensor, _ = verl_reward.extract_reward(batch)  # the module wrapped it: folds credit
    batch.batch["token_level_rewards"] = reward_tensor
    advantages = _compute_advantage(batch, AlgoConfig(norm_adv_by_std_in_grpo=False))

    # The same rollouts judged directly: the credit the trainer must end up with.
    mask = batch.batch["response_mask"]
    sent = [
        {**r, "response_token_ids": r["response_token_ids"][:width], "id": r["group_id"]}
        for r in rows
    ]
    with JudgeClient(service) as client:
        direct = client.judge_batch(sent, {"credit_encoding": "dense"}).results
    credit = torch.zeros(len(rows), width)
    for i, result in enumerate(direct):
        values = torch.from_numpy(credit_array(result))
        credit[i, : len(values)] = values
    last = mask.shape[1] - 1 - mask.flip(-1).float().argmax(-1)
    credit[torch.arange(len(rows)), last] = 0.0
    outcome = torch.tensor(scores)
    expected = _grpo(outcome, mask, batch.non_tensor_batch["uid"], False) + credit * mask
    torch.testing.assert_close(advantages, expected, rtol=0, atol=1e-5)
    # The judge really moved some tokens (not a constant row), and nothing off the mask.
    varying = [i for i in range(len(rows)) if advantages[i][mask[i].bool()].unique().numel() > 1]
    assert varying, "the rules judge gave no per-token credit on the example rollouts"
    assert torch.all(advantages[mask == 0] == 0)
    # Folding twice (a retried step) changes nothing.
    again, _ = verl_reward.extract_reward(batch)
    assert torch.equal(again, reward_tensor)
    manager.loop.run_until_complete(manager.judge_client.aclose())


def test_readme_verl_snippet_runs() -> None:
    code = readme_block("verl")
    namespace: dict[str, Any] = {"__name__": "readme_verl"}
    exec(compile(code, "README.md[verl]", "exec"), namespace)
    expected = torch.tensor([[0.5, 0.25, 0.5, 0.5, 0.0], [-0.375, -0.5, -0.5, 0.0, 0.0]])
    torch.testing.assert_close(namespace["advantages"], expected)


def test_groupwise_judges_each_uid_as_one_group_whatever_the_order(service: str) -> None:
    from tests.test_group_route import FALSE_AT_3, PROBLEM, RIGHT, WRONG_PLAN

    tokenizer = AutoTokenizer.from_pretrained(str(EXAMPLES / "tokenizer"))

    def row(uid: str, lines: list[str]) -> dict[str, Any]:
        ids = tokenizer("\n".join(lines), add_special_tokens=False)["input_ids"]
        return {"group_id": uid, "problem": PROBLEM, "response_token_ids": ids,
                "reference_answer": "408", "tokenizer": str(EXAMPLES / "tokenizer")}  # fmt: skip

    # Two uids interleaved (verl need not keep a uid's samples together), and a lone one.
    rows = [row("u1", RIGHT), row("u2", RIGHT), row("u1", WRONG_PLAN), row("u2", FALSE_AT_3),
            row("u1", FALSE_AT_3), row("u2", WRONG_PLAN), row("u3", RIGHT)]  # fmt: skip
    width = max(len(r["response_token_ids"]) for r in rows)
    batch = _verl_batch(rows, tokenizer, width)
    manager = jv.JudgeRewardManager(
        OmegaConf.create({}),
        tokenizer,
        _score,
        judge_url=service,
        judge_tokenizer=str(EXAMPLES / "tokenizer"),
        judge_options={"groupwise": True},
        group_size=3,
        group_window_s=0.5,
    )

    async def score_all() -> list[dict[str, Any]]:  # as RewardLoopWorker.compute_score_batch
        return list(
            await asyncio.gather(*(manager.run_single(batch[i : i + 1]) for i in range(len(rows))))
        )

    outputs = manager.loop.run_until_complete(score_all())
    manager.loop.run_until_complete(manager.judge_client.aclose())

    assert [o["reward_extra_info"]["judge_status"] for o in outputs] == ["ok"] * len(rows)
    got = [_b64(o["reward_extra_info"]["judge_credit"]) for o in outputs]
    # Each uid's samples judged as one group: its credit is /v1/judge/group's.
    with JudgeClient(service) as client:
        for uid in ("u1", "u2"):
            members = [i for i, r in enumerate(rows) if r["group_id"] == uid]
            sent = [{**rows[i], "id": f"{uid}-{k}", "reward": outputs[i]["reward_score"]}
                    for k, i in enumerate(members)]  # fmt: skip
            group = client.judge_group(sent, {"credit_encoding": "dense"})
            for i, result in zip(members, group.results, strict=True):
                np.testing.assert_allclose(got[i], credit_array(result), atol=1e-6)
            plan = next(i for i in members if rows[i]["response_token_ids"] == rows[2][
                "response_token_ids"])  # fmt: skip
            # The plan's departure is credited only when its group is judged together.
            assert any(d.rollout == members.index(plan) for d in group.group.divergence)
            assert (got[plan] < 0).any()
        alone = client.judge({**rows[6], "id": "u3-0", "reward": 1.0}, {"credit_encoding": "dense"})
    np.testing.assert_allclose(got[6], credit_array(alone), atol=1e-6)


def _b64(value: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(value), dtype="<f4")
