"""verl integration against verl's real functions (``pip install --no-deps verl`` plus the
light packages in the ``trainers`` extra): the ``judge_credit`` estimator registered and
found by ``get_adv_estimator_fn``, run through verl's own ``compute_advantage`` on a batch
laid out like verl's agent loop builds it (left-padded prompts, right-padded responses,
``response_mask``), and the reward manager judging over real HTTP with the rules judge."""

from __future__ import annotations

import asyncio
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
from judge_service.integrations.drift import JudgeDriftError  # noqa: E402
from tests.conftest import EXAMPLES, LiveServer  # noqa: E402
from tests.harness.drift import DRIFT_SETTINGS, turn_bad  # noqa: E402
from tests.readme_snippets import readme_block  # noqa: E402
from tests.test_group_route import FALSE_AT_3, PROBLEM, REPAIRED, RIGHT, WRONG_PLAN  # noqa: E402


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


def test_the_driver_logs_the_drift_verdict_and_stops_on_bad_when_told(
    monkeypatch: pytest.MonkeyPatch, example_rollouts: list[dict[str, Any]]
) -> None:
    rows = [r for r in example_rollouts if r["group_id"] in ("mul", "lin")]
    tokenizer = AutoTokenizer.from_pretrained(str(EXAMPLES / "tokenizer"))

    def judged_batch(step: int) -> DataProto:
        """A batch as the reward workers leave it (no credit: only the drift matters)."""
        batch = _verl_batch(rows, tokenizer, 64)
        batch.batch["rm_scores"] = torch.zeros(len(rows), 64)
        for key, value in ((jv.CREDIT_KEY, ""), (jv.STATUS_KEY, "ok")):
            batch.non_tensor_batch[key] = np.array([value] * len(rows), dtype=object)
        batch.meta_info["reward_extra_keys"] = [jv.CREDIT_KEY, jv.STATUS_KEY]
        batch.meta_info["global_steps"] = step
        return batch

    with LiveServer(create_app(Settings(**DRIFT_SETTINGS))) as live:
        monkeypatch.setenv("JUDGE_URL", live.url)
        monkeypatch.setenv("JUDGE_DRIFT_EVERY", "2")
        monkeypatch.setenv("JUDGE_STOP_ON_BAD", "1")
        turn_bad(live.url, example_rollouts)
        batch = judged_batch(step=3)  # not due: the wrapped extract_reward goes on
        verl_reward.extract_reward(batch)
        assert "judge_drift" not in batch.meta_info
        with pytest.raises(JudgeDriftError, match="bad"):
            verl_reward.extract_reward(judged_batch(step=4))
        monkeypatch.setenv("JUDGE_STOP_ON_BAD", "0")  # logged, and the step trains
        batch = judged_batch(step=4)
        verl_reward.extract_reward(batch)
        assert batch.meta_info["judge_drift"] == 2


def test_readme_verl_snippet_runs() -> None:
    code = readme_block("verl")
    namespace: dict[str, Any] = {"__name__": "readme_verl"}
    exec(compile(code, "README.md[verl]", "exec"), namespace)
    expected = torch.tensor([[0.5, 0.25, 0.5, 0.5, 0.0], [-0.375, -0.5, -0.5, 0.0, 0.0]])
    torch.testing.assert_close(namespace["advantages"], expected)


# Groupwise (options.groupwise): the samples of one uid judged as one group. These tests
# read the credit where the trainer reads it, in token_level_rewards after extract_reward,
# and configure the manager from the environment, as verl's reward workers get it.

TOKENIZER = str(EXAMPLES / "tokenizer")


@pytest.fixture
def groupwise(monkeypatch: pytest.MonkeyPatch) -> Any:
    def configure(url: str, size: int = 3) -> None:
        monkeypatch.setenv("JUDGE_URL", url)
        monkeypatch.setenv("JUDGE_OPTIONS", '{"groupwise": true}')
        monkeypatch.setenv("JUDGE_TOKENIZER", TOKENIZER)
        monkeypatch.setenv("JUDGE_GROUP_SIZE", str(size))
        # Short: a test waits this long for the samples of a uid that never come.
        monkeypatch.setenv("JUDGE_GROUP_WINDOW_S", "0.5")

    return configure


def _sample(tokenizer: Any, uid: Any, lines: list[str], *, bad: bool = False) -> dict[str, Any]:
    """A sample of the 17 × 24 group of tests/test_group_route.py. `bad` puts an id outside
    the example tokenizer's vocabulary at position 3: the service fails that rollout alone."""
    ids = tokenizer("\n".join(lines), add_special_tokens=False)["input_ids"]
    if bad:
        ids = [*ids[:3], 10**6, *ids[4:]]
    return {"group_id": uid, "problem": PROBLEM, "response_token_ids": ids,
            "reference_answer": "408", "tokenizer": TOKENIZER}  # fmt: skip


def _manager(tokenizer: Any) -> jv.JudgeRewardManager:
    return jv.JudgeRewardManager(OmegaConf.create({}), tokenizer, _score)


async def _close(*managers: jv.JudgeRewardManager) -> None:
    for manager in managers:
        await manager.judge_client.aclose()


def _to_trainer(batch: DataProto, outputs: list[dict[str, Any]]) -> tuple[Any, torch.Tensor]:
    """verl's steps from the reward workers' outputs to the trainer's rewards: rm_scores and
    the extra info on the batch (reward_loop.py compute_rm_score, agent_loop.py), then the
    wrapped extract_reward (ray_trainer). Returns the statuses and the decoded credit."""
    scores = [o["reward_score"] for o in outputs]
    infos = [o["reward_extra_info"] for o in outputs]
    batch.batch["rm_scores"] = jv.JudgeRewardManager.assemble_rm_scores(batch, scores)
    keys = list(infos[0])
    for key in keys:
        batch.non_tensor_batch[key] = np.array([info[key] for info in infos], dtype=object)
    batch.meta_info["reward_extra_keys"] = keys
    rewards, _ = verl_reward.extract_reward(batch)
    outcome, credit = jv.decode_token_rewards(rewards, batch.batch["response_mask"])
    # The encoding keeps each row's outcome, whatever the judge did.
    torch.testing.assert_close(outcome, torch.tensor(scores), rtol=0, atol=1e-5)
    return batch.non_tensor_batch[jv.STATUS_KEY], credit


def _as_trained(result: Any, mask: torch.Tensor) -> torch.Tensor:
    """A result's credit as the trainer holds it: on the row's mask, without the last
    model token's (the slot that carries the outcome)."""
    row = torch.zeros(mask.shape[0])
    values = torch.from_numpy(credit_array(result))[: mask.shape[0]]
    row[: len(values)] = values
    row = row * mask
    row[int(mask.nonzero().max())] = 0.0
    return row


def _judged_together(
    client: JudgeClient, rows: list[dict[str, Any]], members: list[int], scores: list[float]
) -> Any:
    sent = [{**rows[i], "id": f"m{k}", "group_id": str(rows[i]["group_id"]),
             "reward": scores[i]} for k, i in enumerate(members)]  # fmt: skip
    return client.judge_group(sent, {"credit_encoding": "dense"})


def _credited_as_groups(
    client: JudgeClient,
    batch: DataProto,
    rows: list[dict[str, Any]],
    outputs: list[dict[str, Any]],
    uids: tuple[str, ...],
) -> tuple[Any, dict[str, tuple[list[int], Any]]]:
    """Every sample judged, and each uid's rows credited in the trainer exactly as
    /v1/judge/group credits that uid's samples; the credit and each uid's (rows, group)."""
    scores = [float(o["reward_score"]) for o in outputs]
    statuses, credit = _to_trainer(batch, outputs)
    assert list(statuses) == ["ok"] * len(rows)
    mask = batch.batch["response_mask"]
    groups: dict[str, tuple[list[int], Any]] = {}
    for uid in uids:
        members = [i for i, r in enumerate(rows) if r["group_id"] == uid]
        group = _judged_together(client, rows, members, scores)
        for i, result in zip(members, group.results, strict=True):
            torch.testing.assert_close(credit[i], _as_trained(result, mask[i]), atol=1e-6, rtol=0)
        groups[uid] = (members, group)
    return credit, groups


def test_groupwise_judges_each_uid_as_one_group_whatever_the_order(
    service: str, groupwise: Any
) -> None:
    groupwise(service)
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    # Two uids interleaved (verl need not keep a uid's samples together), and a lone one.
    rows = [_sample(tokenizer, "u1", RIGHT), _sample(tokenizer, "u2", RIGHT),
            _sample(tokenizer, "u1", WRONG_PLAN), _sample(tokenizer, "u2", FALSE_AT_3),
            _sample(tokenizer, "u1", FALSE_AT_3), _sample(tokenizer, "u2", WRONG_PLAN),
            _sample(tokenizer, "u3", RIGHT)]  # fmt: skip
    width = max(len(r["response_token_ids"]) for r in rows)
    batch = _verl_batch(rows, tokenizer, width)
    manager = _manager(tokenizer)

    async def score_all() -> list[dict[str, Any]]:  # as RewardLoopWorker.compute_score_batch
        outputs = await asyncio.gather(*(manager.run_single(batch[i : i + 1]) for i in range(7)))
        await _close(manager)
        return list(outputs)

    outputs = manager.loop.run_until_complete(score_all())
    mask = batch.batch["response_mask"]
    with JudgeClient(service) as client:
        credit, groups = _credited_as_groups(client, batch, rows, outputs, ("u1", "u2"))
        for members, group in groups.values():
            # The plan's departure is found only when its group is judged together, and
            # its negative credit is on the plan's own row.
            plan = next(i for i in members if rows[i]["response_token_ids"] == rows[2][
                "response_token_ids"])  # fmt: skip
            assert any(d.rollout == members.index(plan) for d in group.group.divergence)
            assert (credit[plan] < 0).any()
        alone = client.judge({**rows[6], "id": "u3-0", "reward": 1.0}, {"credit_encoding": "dense"})
    torch.testing.assert_close(credit[6], _as_trained(alone, mask[6]), atol=1e-6, rtol=0)


def test_groupwise_a_failing_sample_fails_alone_and_scores_land_on_their_rows(
    service: str, groupwise: Any
) -> None:
    """Uids that are not strings (sent as their str), interleaved: uid 7 all correct (an
    equal-reward group: zero-sum scores rank its samples), uid 8 with an unjudgeable sample."""
    groupwise(service)
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    rows = [_sample(tokenizer, 7, REPAIRED), _sample(tokenizer, 8, RIGHT),
            _sample(tokenizer, 7, RIGHT), _sample(tokenizer, 8, RIGHT, bad=True),
            _sample(tokenizer, 7, RIGHT), _sample(tokenizer, 8, FALSE_AT_3)]  # fmt: skip
    width = max(len(r["response_token_ids"]) for r in rows)
    batch = _verl_batch(rows, tokenizer, width)
    manager = _manager(tokenizer)

    async def score_all() -> list[dict[str, Any]]:
        outputs = await asyncio.gather(*(manager.run_single(batch[i : i + 1]) for i in range(6)))
        await _close(manager)
        return list(outputs)

    outputs = manager.loop.run_until_complete(score_all())
    scores = [float(o["reward_score"]) for o in outputs]
    assert scores == [1.0, 1.0, 1.0, 1.0, 1.0, 0.0]
    statuses, credit = _to_trainer(batch, outputs)
    assert list(statuses) == ["ok", "ok", "ok", "failed", "ok", "ok"]
    assert torch.all(credit[3] == 0)  # the failed sample trains on its outcome alone
    mask = batch.batch["response_mask"]
    with JudgeClient(service) as client:
        equal = _judged_together(client, rows, [0, 2, 4], scores)
        mixed = _judged_together(client, rows, [1, 3, 5], scores)
    assert equal.group.equal_reward and equal.group.scores is not None
    assert abs(sum(equal.group.scores)) < 1e-9 and equal.group.scores[0] < 0
    for i, result in [
        *zip([0, 2, 4], equal.results, strict=True),
        *zip([1, 5], mixed.results[::2], strict=True),
    ]:
        torch.testing.assert_close(credit[i], _as_trained(result, mask[i]), atol=1e-6, rtol=0)
    # The repaired slip ranks below its clean siblings, on its own row.
    per_token = [float(credit[i][mask[i].bool()].mean()) for i in (0, 2, 4)]
    assert per_token[0] < per_token[1] == per_token[2]
    assert mixed.results[1].status == "failed"
    assert mixed.group.correct == [True, None, False]


def test_groupwise_a_refused_group_still_credits_all_but_its_failing_sample(
    groupwise: Any,
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    with LiveServer(create_app(Settings(max_group_size=2))) as small:
        groupwise(small.url)
        rows = [_sample(tokenizer, "u", RIGHT), _sample(tokenizer, "u", WRONG_PLAN, bad=True),
                _sample(tokenizer, "u", FALSE_AT_3)]  # fmt: skip
        width = max(len(r["response_token_ids"]) for r in rows)
        batch = _verl_batch(rows, tokenizer, width)
        manager = _manager(tokenizer)

        async def score_all() -> list[Any]:
            outputs = await asyncio.gather(
                *(manager.run_single(batch[i : i + 1]) for i in range(3)), return_exceptions=True
            )
            await _close(manager)
            return list(outputs)

        outputs = manager.loop.run_until_complete(score_all())
        raised = [o for o in outputs if isinstance(o, BaseException)]
        assert not raised, f"the reward worker raised: {raised[0]!r}"
        statuses, credit = _to_trainer(batch, outputs)
        assert list(statuses) == ["ok", "failed", "ok"]
        mask = batch.batch["response_mask"]
        with JudgeClient(small.url) as client:
            for i in (0, 2):
                reward = float(outputs[i]["reward_score"])
                alone = client.judge({**rows[i], "id": "x", "reward": reward},
                                     {"credit_encoding": "dense"})  # fmt: skip
                torch.testing.assert_close(
                    credit[i], _as_trained(alone, mask[i]), atol=1e-6, rtol=0
                )


def _streamed_sample(batch: DataProto, i: int) -> DataProto:
    """Row i as AgentLoopWorker._compute_score sends it to a reward worker
    (verl/experimental/agent_loop/agent_loop.py, 0.9.1; the module needs hydra, which CI does
    not install): prompt and response unpadded, attention all ones, no response_mask, and
    the sample's own non-tensor fields (its uid among them)."""
    prompt = batch.batch["prompts"][i][
        batch.batch["attention_mask"][i, : batch.batch["prompts"].shape[1]].bool()
    ]
    response = batch.batch["responses"][i][batch.batch["response_mask"][i].bool()]
    ids = torch.cat([prompt, response])
    return DataProto.from_dict(
        tensors={"prompts": prompt[None], "responses": response[None], "input_ids": ids[None],
                 "attention_mask": torch.ones_like(ids)[None]},
        non_tensors={k: v[i : i + 1] for k, v in batch.non_tensor_batch.items()},
    )  # fmt: skip


def test_groupwise_streamed_to_several_reward_workers_judges_each_uid_whole(
    service: str, groupwise: Any
) -> None:
    """verl's default path (no reward model): the agent loop scores each sample as it
    finishes, on `random.choice` of `reward.num_workers` (default 8) reward workers. Here 3
    workers, the samples dealt round-robin: each uid's three land on three workers."""
    groupwise(service)
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    rows = [_sample(tokenizer, "u1", RIGHT), _sample(tokenizer, "u2", RIGHT),
            _sample(tokenizer, "u1", WRONG_PLAN), _sample(tokenizer, "u2", FALSE_AT_3),
            _sample(tokenizer, "u1", FALSE_AT_3), _sample(tokenizer, "u2", WRONG_PLAN)]  # fmt: skip
    width = max(len(r["response_token_ids"]) for r in rows)
    batch = _verl_batch(rows, tokenizer, width)
    workers = [_manager(tokenizer) for _ in range(3)]

    async def stream() -> list[dict[str, Any]]:
        outputs = await asyncio.gather(
            *(workers[i % 3].run_single(_streamed_sample(batch, i)) for i in range(6))
        )
        await _close(*workers)
        return list(outputs)

    outputs = workers[0].loop.run_until_complete(stream())
    with JudgeClient(service) as client:
        _credited_as_groups(client, batch, rows, outputs, ("u1", "u2"))


def test_one_samples_4xx_fails_that_sample_and_the_step_goes_on(service: str) -> None:
    """Outside groupwise each sample is its own /v1/judge call: the one the service refuses
    (a token id outside the tokenizer's vocabulary: 422) comes back failed, without credit,
    and the step goes on; its siblings are credited as /v1/judge credits them."""
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    rows = [_sample(tokenizer, "a", RIGHT), _sample(tokenizer, "b", FALSE_AT_3, bad=True),
            _sample(tokenizer, "c", FALSE_AT_3)]  # fmt: skip
    batch = _verl_batch(rows, tokenizer, max(len(r["response_token_ids"]) for r in rows))
    manager = jv.JudgeRewardManager(
        OmegaConf.create({}), tokenizer, _score, judge_url=service, judge_tokenizer=TOKENIZER
    )

    async def score_all() -> list[dict[str, Any]]:
        outputs = await asyncio.gather(*(manager.run_single(batch[i : i + 1]) for i in range(3)))
        await _close(manager)
        return list(outputs)

    outputs = manager.loop.run_until_complete(score_all())
    assert [o["reward_score"] for o in outputs] == [1.0, 0.0, 0.0]
    statuses, credit = _to_trainer(batch, outputs)
    assert list(statuses) == ["ok", "failed", "ok"]
    assert torch.all(credit[1] == 0)  # the refused sample trains on its outcome alone
    mask = batch.batch["response_mask"]
    with JudgeClient(service) as client:
        for i in (0, 2):
            alone = client.judge({**rows[i], "id": "x"}, {"credit_encoding": "dense"})
            torch.testing.assert_close(credit[i], _as_trained(alone, mask[i]), atol=1e-6, rtol=0)
    assert torch.any(credit[2] < 0)  # the false step really was credited
