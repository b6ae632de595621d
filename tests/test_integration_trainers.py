"""OpenRLHF, SkyRL, slime and prime-rl integrations on tensors laid out as each trainer
builds them (the trainers themselves are not installed), judged over real HTTP by the rules
judge. Each expected value is placed from the test's own knowledge of where a response
token sits in the trainer's layout, not from the module's arithmetic."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from judge_service.api.app import create_app  # noqa: E402
from judge_service.client import AsyncJudgeClient, JudgeClient, credit_array  # noqa: E402
from judge_service.config import Settings  # noqa: E402
from judge_service.integrations import openrlhf, prime_rl, skyrl, slime  # noqa: E402
from tests.conftest import EXAMPLES, LiveServer  # noqa: E402
from tests.readme_snippets import readme_block  # noqa: E402


@pytest.fixture(scope="module")
def service() -> Iterator[str]:
    settings = Settings(default_tokenizer=str(EXAMPLES / "tokenizer"))
    with LiveServer(create_app(settings)) as live:
        yield live.url


@pytest.fixture(scope="module")
def responses(example_rollouts: list[dict[str, Any]]) -> list[list[int]]:
    wanted = ["mul-error-corrected", "mul-correct", "mul-error-propagated", "prompt-injection"]
    by_id = {r["id"]: r["response_token_ids"] for r in example_rollouts}
    return [list(by_id[i]) for i in wanted]


def _masks(responses: list[list[int]]) -> list[list[int]]:
    """Row 0 is multi-turn: tokens 20..29 are tool output the policy did not sample."""
    masks = [[1] * len(r) for r in responses]
    masks[0][20:30] = [0] * 10
    return masks


def _direct(
    url: str, responses: list[list[int]], masks: list[list[int]], **extra: Any
) -> list[np.ndarray]:
    rollouts = [
        {"id": f"d{i}", "response_token_ids": r, "response_mask": m, **extra}
        for i, (r, m) in enumerate(zip(responses, masks, strict=True))
    ]
    with JudgeClient(url) as client:
        results = client.judge_batch(rollouts, {"credit_encoding": "dense"}).results
    credit = [credit_array(res) for res in results]
    assert any(np.unique(c).size > 1 for c in credit), "no per-token credit to place"
    assert all(np.all(c[np.asarray(m) == 0] == 0) for c, m in zip(credit, masks, strict=True))
    return credit


PROMPTS = [[7, 8, 9], [7, 8], [7, 8, 9, 10, 11], [7]]
REWARDS = [1.0, 0.0, 0.5, -1.0]


def test_openrlhf_shifted_action_mask(service: str, responses: list[list[int]]) -> None:
    masks = _masks(responses)
    max_len = 60  # row 0 (3 + 72 tokens) is cut at max_len, as OpenRLHF does
    rows = []
    for p, r, m in zip(PROMPTS, responses, masks, strict=True):
        # samples_generator.py L247-267: observation = prompt + response; action_ranges
        # mark the sampled spans; everything cut at max_len; action_mask shifted by one.
        seq = torch.tensor(p + r)
        action = torch.zeros(len(seq), dtype=torch.long)
        action[len(p) :] = torch.tensor(m)
        rows.append((seq[:max_len], action[1:max_len]))
    width = max(len(s) for s, _ in rows)
    sequences = torch.zeros(len(rows), width, dtype=torch.long)  # zero_pad_sequences, right
    action_mask = torch.zeros(len(rows), width - 1, dtype=torch.long)
    for b, (s, a) in enumerate(rows):
        sequences[b, : len(s)] = s
        action_mask[b, : len(a)] = a
    base = torch.tensor(REWARDS)[:, None] * action_mask
    experience = SimpleNamespace(
        sequences=sequences,
        action_mask=action_mask,
        advantages=base.clone(),
        index=[10, 11, 12, 13],
        prompts=["What is 17 × 24?"] * 4,
        labels=["408"] * 4,
    )
    with JudgeClient(service) as client:
        counts = openrlhf.judge_experiences([experience], client, {"credit_encoding": "dense"})
    assert counts == {"fallback": 0, "failed": 0}

    kept = [r[: max_len - len(p)] for p, r in zip(PROMPTS, responses, strict=True)]
    kept_masks = [m[: len(k)] for m, k in zip(masks, kept, strict=True)]
    credit = _direct(service, kept, kept_masks, problem="What is 17 × 24?", reference_answer="408")
    expected = base.clone()
    for b, (p, c) in enumerate(zip(PROMPTS, credit, strict=True)):
        # response token j is sequences[b, len(p) + j]: advantage index len(p) + j - 1
        expected[b, len(p) - 1 : len(p) - 1 + len(c)] += torch.from_numpy(c)
    torch.testing.assert_close(experience.advantages, expected)
    assert torch.all(experience.advantages[action_mask == 0] == 0)
    with pytest.raises(ValueError, match="shifts it by one"):
        openrlhf.action_rollouts(sequences, torch.zeros_like(sequences), ["a"] * 4)


class _Batch(dict[str, Any]):
    """SkyRL's TrainingInputBatch: tensors by key plus ``metadata``."""

    metadata: dict[str, Any]


def test_skyrl_right_aligned(service: str, responses: list[list[int]]) -> None:
    masks = _masks(responses)
    prompts, resp, lm = [*PROMPTS, PROMPTS[3]], [*responses, responses[3]], [*masks, masks[3]]
    # preprocess.py convert_prompts_responses_to_batch_tensors: one left-padded block of
    # prompt + response; response tensors right-aligned in (B, max_response).
    total = max(len(p) + len(r) for p, r in zip(prompts, resp, strict=True))
    width = max(len(r) for r in resp)
    n = len(resp)
    sequences = torch.zeros(n, total, dtype=torch.long)
    response_mask = torch.zeros(n, width, dtype=torch.long)
    loss_mask = torch.zeros(n, width, dtype=torch.long)
    for i, (p, r, m) in enumerate(zip(prompts, resp, lm, strict=True)):
        sequences[i, total - len(p) - len(r) :] = torch.tensor(p + r)
        response_mask[i, width - len(r) :] = 1
        loss_mask[i, width - len(r) :] = torch.tensor(m)
    rewards = torch.tensor([*REWARDS, REWARDS[3]])
    base = rewards[:, None] * response_mask
    data = _Batch(
        sequences=sequences,
        response_mask=response_mask,
        loss_mask=loss_mask,
        advantages=base.clone(),
    )
    data.metadata = {"uids": ["g", "g", "g", "g", "g"], "pad_size": 1}  # last row: padding
    with JudgeClient(service) as client:
        counts = skyrl.add_judge_credit(data, client, {"credit_encoding": "base64-f32"}, step=3)
    assert counts == {"fallback": 0, "failed": 0}

    credit = _direct(service, responses, masks)
    expected = base.clone()
    for i, c in enumerate(credit):
        expected[i, width - len(c) :] += torch.from_numpy(c)
    torch.testing.assert_close(data["advantages"], expected)
    assert torch.equal(data["advantages"][4], base[4])  # the padding row is not judged


def _cp_indices(total: int, response: int, rank: int, size: int) -> list[int]:
    """Response-token indices a CP rank holds: logit position q = prompt - 1 + j lies in one
    of the rank's two chunks of the sequence (slime cp_utils.py), in chunk order."""
    prompt = total - response
    chunk = (total + 2 * size - 1) // (2 * size)
    out = []
    for k in (rank, 2 * size - rank - 1):
        out += [j for j in range(response) if k * chunk <= prompt - 1 + j < (k + 1) * chunk]
    return out


@pytest.mark.parametrize("cp_size", [1, 2, 3])
def test_slime_custom_advantage_with_cp(
    service: str, responses: list[list[int]], cp_size: int
) -> None:
    masks = _masks(responses)
    credit = _direct(service, responses, masks)
    for rank in range(cp_size):
        tokens, totals, lengths, kl = [], [], [], []
        for p, r in zip(PROMPTS, responses, strict=True):
            tokens.append(torch.tensor(p + r))
            totals.append(len(p) + len(r))
            lengths.append(len(r))
            kl.append(torch.zeros(len(_cp_indices(len(p) + len(r), len(r), rank, cp_size))))
        rollout_data: dict[str, Any] = {
            "tokens": tokens,
            "total_lengths": totals,
            "response_lengths": lengths,
            "loss_masks": [torch.tensor(m, dtype=torch.int32) for m in masks],
            "rewards": REWARDS,  # slime normalises them per group on the rollout side
            "kl": kl,
            "sample_indices": [0, 1, 2, 3],
        }
        with JudgeClient(service) as client:
            slime.add_judge_credit(rollout_data, client, {}, cp_rank=rank, cp_size=cp_size)
        for i, c in enumerate(credit):
            idx = _cp_indices(totals[i], lengths[i], rank, cp_size)
            expected = torch.tensor(REWARDS[i]) + torch.from_numpy(c[idx])
            torch.testing.assert_close(rollout_data["advantages"][i], expected)
            assert rollout_data["advantages"][i].shape == kl[i].shape
            assert rollout_data["returns"][i] is rollout_data["advantages"][i]


def _assign_advantages(trace: Any, value: float) -> None:
    """prime-rl's assign_advantages (src/prime_rl/orchestrator/algo/routing.py) for a scalar:
    every sampled token of every node with a mask gets it, in compact order."""
    for node in trace.nodes:
        if any(node.mask):
            node.advantages = [value] * sum(node.mask)


def _trace(tid: str, reward: float, response: list[int]) -> Any:
    node = SimpleNamespace
    nodes = [
        node(token_ids=[1, 2, 3, 4], mask=[False] * 4, advantages=None),  # system + user
        node(token_ids=[5, 6, *response[:20]], mask=[False, False] + [True] * 20, advantages=None),
        node(token_ids=response[20:30], mask=[False] * 10, advantages=None),  # tool output
        node(token_ids=[5, 6, *response[30:]], mask=[False, False] + [True] * (len(response) - 30)),
    ]
    nodes[3].advantages = None
    return SimpleNamespace(id=tid, reward=reward, nodes=nodes, branches=[object()])


def test_prime_rl_compact_order(service: str, responses: list[list[int]]) -> None:
    traces = [_trace(f"t{i}", REWARDS[i], r) for i, r in enumerate(responses)]
    mean = sum(REWARDS) / len(REWARDS)
    for trace in traces:
        _assign_advantages(trace, trace.reward - mean)  # GRPOAlgorithm: mean-only

    async def run() -> dict[str, int]:
        async with AsyncJudgeClient(service) as client:
            return await prime_rl.add_judge_credit(traces, client, {}, group_id="g")

    assert asyncio.run(run()) == {"fallback": 0, "failed": 0}
    # What the judge saw for each trace: nodes 1..3, masks as sampled.
    full = [[5, 6, *r[:20], *r[20:30], 5, 6, *r[30:]] for r in responses]
    masks = [[0, 0] + [1] * 20 + [0] * 10 + [0, 0] + [1] * (len(r) - 30) for r in responses]
    credit = _direct(service, full, masks)
    for trace, c, m in zip(traces, credit, masks, strict=True):
        sampled = c[np.asarray(m) == 1]
        a = trace.reward - mean
        assert trace.nodes[0].advantages is None and trace.nodes[2].advantages is None
        np.testing.assert_allclose(trace.nodes[1].advantages, a + sampled[:20], atol=1e-6)
        np.testing.assert_allclose(trace.nodes[3].advantages, a + sampled[20:], atol=1e-6)
    forked = SimpleNamespace(id="f", nodes=[], branches=[1, 2])
    with pytest.raises(ValueError, match="branches"):
        prime_rl.trace_rollout(forked)


@pytest.mark.parametrize("name", ["openrlhf", "skyrl", "slime", "prime-rl"])
def test_readme_snippets_run(service: str, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGE_URL", service)
    namespace: dict[str, Any] = {"__name__": f"readme_{name}"}
    exec(compile(readme_block(name), f"README.md[{name}]", "exec"), namespace)
    advantages = namespace["advantages"]
    assert len(advantages) > 0


@pytest.mark.parametrize("name", ["openrlhf", "skyrl", "slime", "prime_rl", "verl"])
@pytest.mark.slow
def test_each_module_imports_alone(name: str) -> None:
    """Importing one integration pulls in no other trainer (and the four tensor-only ones
    no trainer at all)."""
    import subprocess
    import sys

    if name == "verl":
        pytest.importorskip("verl.trainer.ppo.core_algos")
    others = {"trl", "verl", "openrlhf", "skyrl", "slime", "prime_rl", "megatron"} - {name}
    code = (
        f"import sys, judge_service.integrations.{name}\n"
        f"loaded = sorted(m for m in {sorted(others)!r} if m in sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
