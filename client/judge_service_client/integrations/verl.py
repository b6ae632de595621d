"""verl: a reward manager that asks the service for credit, and the ``judge_credit``
advantage estimator that adds it to the GRPO advantage.

Read against verl 0.9.1 (PyPI) and ``volcengine/verl`` main (docs/trainers.md "verl"):

* A registered estimator receives only ``token_level_rewards``, ``response_mask``,
  ``config`` and ``index`` (``verl/trainer/ppo/ray_trainer.py``, ``compute_advantage``,
  the ``else:`` branch); only ``"gdpo"`` also gets ``non_tensor_batch``. So the credit
  has to ride *inside* ``token_level_rewards``.
* A reward manager's ``run_single`` returns one float ``reward_score`` per sample, which
  verl writes at the last valid response token of ``rm_scores``
  (``verl/experimental/agent_loop/agent_loop.py`` ``_postprocess``;
  ``verl/experimental/reward_loop/reward_manager/base.py`` ``assemble_rm_scores``); per-token
  data can travel only in ``reward_extra_info`` (-> ``non_tensor_batch``), one value per
  sample, hence credit as a ``base64-f32`` string.

Encoding of ``token_level_rewards`` (row i, response mask m, outcome reward R_i, credit c):
let s_i be the last position with m = 1 (the last model token: the sampled EOS of a
finished response). Then ``r[i, t] = c[t]·m[t]`` for t ≠ s_i, and
``r[i, s_i] = R_i − Σ_{t≠s_i} c[t]·m[t]``. The row still sums to R_i, so verl's own
outcome estimators, its ``critic/score`` metrics and a run that forgets to switch the
estimator all see exactly the outcome reward (credit is then simply ignored). The
estimator decodes ``R_i = Σ_t r[i, t]`` and ``c[t] = r[i, t]·m[t]`` (t ≠ s_i): one
position has to hold R_i, so **the credit of the last model token is dropped** (it is the
EOS of a finished response, where credit should be ~0; a truncated row loses its last
token's credit). With ``algorithm.use_kl_in_reward=True`` the per-token KL penalty lands
in both parts (in R_i as its sum, per token in c); keep it off (GRPO uses the KL loss).

The glue: verl copies ``reward_extra_info["judge_credit"]`` into ``non_tensor_batch``
but never into ``rm_scores``. Importing this module wraps
``extract_reward`` (``verl/trainer/ppo/reward.py``, which ``ray_trainer`` calls) so that it
first folds that credit into
``rm_scores`` with the encoding above (``fold_judge_credit``; a no-op for a batch without
the key). Load the module in every verl process with verl's own hook,
``VERL_USE_EXTERNAL_MODULES=judge_service_client.integrations.verl`` (``verl/__init__.py``), and
train with the legacy trainer, ``trainer.use_v1=False``: the v1 trainer fetches a fixed
field list from its TransferQueue (``verl/trainer/ppo/v1/trainer_base.py``) that carries no
``reward_extra_info``, so there the credit would not arrive (not supported yet).

A sample the service refuses (its own 4xx: a token id outside the tokenizer, a size
limit) comes back ``failed`` in ``judge_status``, with no credit, and trains on its
outcome reward alone; the step goes on, as with TRL's integration.

Groupwise (``JUDGE_OPTIONS='{"groupwise": true}'``): verl's GRPO groups samples by
``non_tensor_batch["uid"]`` (``compute_grpo_outcome_advantage``'s ``index``). A reward worker
cannot gather a uid: on verl's default path the agent loop sends each sample, as its
generation ends, to a reward worker picked at random (``AgentLoopWorker._compute_score``).
So there the manager computes only the outcome reward, marks the sample ``pending`` and
leaves its prompt fields in ``reward_extra_info["judge_request"]``; the wrapped
``extract_reward``, on the driver, where the whole batch is, first judges the pending
samples (``judge_groups``): the samples of each uid as one ``/v1/judge/group`` call
(``group_id`` = uid, each with its outcome reward), the groups concurrently. The driver
reads ``JUDGE_URL``, ``JUDGE_API_KEY`` and ``JUDGE_OPTIONS`` from its own environment. A
lone sample is judged alone; a group the service refuses (a 4xx) sample by sample, where
a sample's own 4xx fails that sample alone.

Drift: the wrapped ``extract_reward`` also asks the service's drift audit every
``JUDGE_DRIFT_EVERY`` steps (default 50; ``watch_drift``), logs the verdict and, with
``JUDGE_STOP_ON_BAD=1``, stops the run on ``bad``.

Config::

    VERL_USE_EXTERNAL_MODULES=judge_service_client.integrations.verl \\
    JUDGE_URL=http://127.0.0.1:8000 JUDGE_OPTIONS='{"lambda": 0.5}' \\
    python -m verl.trainer.main_ppo \\
        trainer.use_v1=False reward.reward_manager.name=judge \\
        algorithm.adv_estimator=judge_credit algorithm.norm_adv_by_std_in_grpo=False
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import sys
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch
from verl import DataProto
from verl.experimental.reward_loop.reward_manager import register
from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
from verl.trainer.ppo import reward as verl_reward
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, register_adv_est

from judge_service_client.client import AsyncJudgeClient, JudgeClient
from judge_service_client.client.errors import ClientRequestError
from judge_service_client.integrations.drift import DriftWatch
from judge_service_client.schemas import Options, Result

log = logging.getLogger(__name__)

__all__ = [
    "CREDIT_KEY",
    "ESTIMATOR",
    "JudgeRewardManager",
    "compute_judge_credit_advantage",
    "decode_token_rewards",
    "encode_token_rewards",
    "fold_judge_credit",
    "judge_groups",
    "watch_drift",
]

ESTIMATOR = "judge_credit"
CREDIT_KEY = "judge_credit"
STATUS_KEY = "judge_status"
REQUEST_KEY = "judge_request"
PENDING = "pending"  # a groupwise sample's status until the driver judges its uid
_FOLDED = "judge_credit_folded"


def _outcome_slot(response_mask: torch.Tensor) -> torch.Tensor:
    """(B,) index of each row's last position with mask 1 (0 for a row with none)."""
    width = response_mask.shape[-1]
    positions = torch.arange(width, device=response_mask.device).expand_as(response_mask)
    return torch.where(response_mask > 0, positions, -1).max(dim=-1).values.clamp(min=0)


def encode_token_rewards(
    outcome: torch.Tensor, credit: torch.Tensor, response_mask: torch.Tensor
) -> torch.Tensor:
    """(B, L) ``token_level_rewards`` carrying outcome (B,) and credit (B, L): see the module
    docstring. Credit outside the mask and at each row's last model token is dropped."""
    if credit.shape != response_mask.shape or outcome.shape != credit.shape[:1]:
        raise ValueError(
            f"credit {tuple(credit.shape)}, response_mask {tuple(response_mask.shape)} and "
            f"outcome {tuple(outcome.shape)} do not describe one (B, L) batch"
        )
    rows = torch.arange(credit.shape[0], device=credit.device)
    slot = _outcome_slot(response_mask)
    out = (credit * response_mask.to(credit.dtype)).to(torch.float32)
    out[rows, slot] = 0.0
    out[rows, slot] = outcome.to(torch.float32) - out.sum(dim=-1)
    return out


def decode_token_rewards(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The (outcome (B,), credit (B, L)) that ``encode_token_rewards`` packed."""
    rows = torch.arange(token_level_rewards.shape[0], device=token_level_rewards.device)
    outcome = token_level_rewards.sum(dim=-1)
    credit = token_level_rewards * response_mask.to(token_level_rewards.dtype)
    credit[rows, _outcome_slot(response_mask)] = 0.0
    return outcome, credit


@register_adv_est(ESTIMATOR)  # type: ignore[untyped-decorator]  # verl types it as Any
def compute_judge_credit_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray[Any, Any],
    epsilon: float = 1e-6,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO advantage of the outcome (verl's own estimator) plus the judge's credit, on the
    response mask. ``config.norm_adv_by_std_in_grpo`` is honoured; set it False (Dr. GRPO)
    so that A_i and credit share one scale."""
    norm = bool(getattr(config, "norm_adv_by_std_in_grpo", True)) if config is not None else True
    if norm:
        log.warning(
            "judge_credit with norm_adv_by_std_in_grpo=True: A_i is divided by each group's std"
            " and the credit is not; set algorithm.norm_adv_by_std_in_grpo=False (Dr. GRPO)"
        )
    outcome, credit = decode_token_rewards(token_level_rewards, response_mask)
    rows = torch.arange(outcome.shape[0], device=outcome.device)
    scalar = torch.zeros_like(token_level_rewards)
    scalar[rows, _outcome_slot(response_mask)] = outcome
    base, _ = compute_grpo_outcome_advantage(
        token_level_rewards=scalar,
        response_mask=response_mask,
        index=index,
        epsilon=epsilon,
        norm_adv_by_std_in_grpo=norm,
    )
    advantages = base + credit * response_mask.to(credit.dtype)
    return advantages, advantages


def _decode_b64(value: Any) -> np.ndarray[Any, np.dtype[np.float32]]:
    if not isinstance(value, str | bytes) or not value:
        return np.zeros(0, dtype=np.float32)  # a failed judgement: no credit
    return np.frombuffer(base64.b64decode(value), dtype="<f4").astype(np.float32)


def fold_judge_credit(batch: DataProto, key: str = CREDIT_KEY) -> DataProto:
    """Rewrite ``batch.batch["rm_scores"]`` in place into the encoding of the module
    docstring, the outcome being each row's current sum and the credit the base64-f32
    strings in ``batch.non_tensor_batch[key]`` (left-aligned: verl right-pads responses;
    credit past the kept response length is cut). Idempotent; a no-op without ``key``."""
    if key not in batch.non_tensor_batch or batch.meta_info.get(_FOLDED):
        return batch
    scores: torch.Tensor = batch.batch["rm_scores"]
    mask: torch.Tensor = batch.batch["response_mask"]
    credit = np.zeros(tuple(scores.shape), dtype=np.float32)
    for i, value in enumerate(batch.non_tensor_batch[key]):
        row = _decode_b64(value)[: credit.shape[1]]
        credit[i, : row.shape[0]] = row
    outcome = scores.sum(dim=-1)
    batch.batch["rm_scores"] = encode_token_rewards(
        outcome, torch.from_numpy(credit).to(scores.device), mask
    ).to(scores.dtype)
    batch.meta_info[_FOLDED] = True
    return batch


def _install() -> None:
    """Wrap ``extract_reward`` where the trainer will read it. ray_trainer binds the name
    at its own import (``from verl.trainer.ppo.reward import extract_reward``), so patch
    the source module (enough when this runs first, as VERL_USE_EXTERNAL_MODULES does) and
    ray_trainer too when it is already loaded. Importing ray_trainer here would pull in
    verl's whole training stack."""
    current: Callable[..., Any] = verl_reward.extract_reward
    if not getattr(current, "_judge_credit", False):

        def extract_reward(batch: DataProto) -> Any:
            return current(fold_judge_credit(watch_drift(judge_groups(batch))))

        extract_reward._judge_credit = True  # type: ignore[attr-defined]
        verl_reward.extract_reward = extract_reward
    trainer = sys.modules.get("verl.trainer.ppo.ray_trainer")
    if trainer is not None:
        setattr(trainer, "extract_reward", verl_reward.extract_reward)  # noqa: B010


_install()


@register("judge")
class JudgeRewardManager(NaiveRewardManager):
    """verl's ``NaiveRewardManager`` (the outcome reward, from ``compute_score``) plus one
    service call per sample, concurrent with it, whose credit goes to
    ``reward_extra_info["judge_credit"]`` (base64-f32) and status to ``"judge_status"``.

    Settings come from the environment of verl's reward workers (or keyword arguments):
    ``JUDGE_URL`` (required), ``JUDGE_API_KEY``, ``JUDGE_OPTIONS`` (JSON of the API's
    options), ``JUDGE_TOKENIZER`` (the tokenizer the service loads; default the trainer
    tokenizer's ``name_or_path``). The rollout sent is the response's token ids as the
    rollout server produced them (never re-tokenised text), with ``response_mask`` so that
    tool output is context with zero credit.
    """

    def __init__(
        self,
        config: Any,
        tokenizer: Any,
        compute_score: Any,
        reward_router_address: str | None = None,
        reward_model_tokenizer: Any = None,
        *,
        judge_url: str | None = None,
        judge_options: Options | Mapping[str, Any] | None = None,
        judge_client: AsyncJudgeClient | None = None,
        judge_tokenizer: str | None = None,
    ) -> None:
        super().__init__(  # type: ignore[no-untyped-call]
            config, tokenizer, compute_score, reward_router_address, reward_model_tokenizer
        )
        url = judge_url or os.environ.get("JUDGE_URL")
        if judge_client is None and not url:
            raise ValueError("JudgeRewardManager needs JUDGE_URL (or judge_url / judge_client)")
        if judge_options is None:
            judge_options = json.loads(os.environ.get("JUDGE_OPTIONS") or "{}")
        fields = (
            judge_options.model_dump(by_alias=True, exclude_unset=True)
            if isinstance(judge_options, Options)
            else dict(judge_options)
        )
        fields["credit_encoding"] = "base64-f32"  # one string per sample (numpy-safe)
        self.judge_options = Options.model_validate(fields)
        self.judge_client = judge_client or AsyncJudgeClient(
            str(url), api_key=os.environ.get("JUDGE_API_KEY"), timeout=600.0
        )
        name = judge_tokenizer or os.environ.get("JUDGE_TOKENIZER")
        name = name or getattr(tokenizer, "name_or_path", None)
        self.judge_tokenizer: str | None = str(name) if name else None
        self.groupwise = bool(self.judge_options.groupwise)

    def _rollout(self, item: Any) -> dict[str, Any]:
        responses: torch.Tensor = item.batch["responses"]
        width = responses.shape[-1]
        attention: torch.Tensor = item.batch["attention_mask"]
        n = int(attention[-width:].sum())  # right-padded response (agent_loop.py _postprocess)
        prompt_ids = item.batch["prompts"][attention[:-width].bool()].tolist()  # left-padded
        non_tensor = item.non_tensor_batch
        rollout: dict[str, Any] = {
            "id": str(non_tensor.get("uid", "verl")),
            "response_token_ids": responses[:n].tolist(),
            "problem": self._decode(prompt_ids),
        }
        if "response_mask" in item.batch:
            rollout["response_mask"] = [int(v) for v in item.batch["response_mask"][:n].tolist()]
        truth = (non_tensor.get("reward_model") or {}).get("ground_truth")
        if truth is not None:
            rollout["reference_answer"] = str(truth)
        if self.judge_tokenizer:
            rollout["tokenizer"] = self.judge_tokenizer
        return rollout

    def _decode(self, ids: list[int]) -> str:
        tokenizer: Any = self.tokenizer  # verl annotates it as the AutoTokenizer factory
        return str(tokenizer.decode(ids, skip_special_tokens=True))

    async def _judge(self, item: Any) -> Result:
        """The sample's own 4xx (a token id outside the tokenizer, a size limit) fails
        that sample, as TRL's integration does: the step trains on its outcome alone."""
        return await _alone(self.judge_client, self.judge_options, self._rollout(item))

    async def run_single(self, data: DataProto) -> dict[str, Any]:
        item = data[-1:][0]
        if self.groupwise:  # judged on the driver with its uid (`judge_groups`)
            outcome = await super().run_single(data)
            rollout = self._rollout(item)
            request = {k: rollout[k] for k in _REQUEST_FIELDS if k in rollout}
            pending: dict[str, Any] = dict(outcome.get("reward_extra_info") or {})
            pending[CREDIT_KEY], pending[STATUS_KEY] = "", PENDING
            pending[REQUEST_KEY] = json.dumps(request)
            return {"reward_score": outcome["reward_score"], "reward_extra_info": pending}
        outcome, result = await asyncio.gather(super().run_single(data), self._judge(item))
        extra: dict[str, Any] = dict(outcome.get("reward_extra_info") or {})
        extra[CREDIT_KEY], extra[STATUS_KEY] = _credit_and_status(result)
        return {"reward_score": outcome["reward_score"], "reward_extra_info": extra}


# What the driver cannot rebuild from the batch's tensors: the decoded prompt, the
# tokenizer the reward worker named, the ground truth as the worker read it.
_REQUEST_FIELDS = ("problem", "reference_answer", "tokenizer")


def _credit_and_status(result: Result) -> tuple[str, str]:
    if result.status == "failed":
        log.warning("judge failed for %s: %s", result.id, result.error)
        return "", result.status
    return (result.credit if isinstance(result.credit, str) else ""), result.status


def judge_groups(batch: DataProto, client: AsyncJudgeClient | None = None) -> DataProto:
    """Judge the batch's ``pending`` samples (groupwise, see the module docstring): those of
    one uid as one group, whatever their rows; each result written back to its row's
    ``judge_credit`` and ``judge_status``. A no-op for a batch without pending samples."""
    statuses = batch.non_tensor_batch.get(STATUS_KEY)
    if statuses is None:
        return batch
    rows = [i for i, status in enumerate(statuses) if status == PENDING]
    if not rows:
        return batch
    responses: torch.Tensor = batch.batch["responses"]
    width = responses.shape[-1]
    lengths = batch.batch["attention_mask"][:, -width:].sum(dim=-1).tolist()  # right-padded
    masks = batch.batch.get("response_mask", None)  # absent: every token is the model's
    outcome = batch.batch["rm_scores"].sum(dim=-1).tolist()
    uids = batch.non_tensor_batch.get("uid")
    groups: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for i in rows:
        n = int(lengths[i])
        uid = str(uids[i]) if uids is not None else f"row-{i}"
        rollout: dict[str, Any] = {
            **json.loads(batch.non_tensor_batch[REQUEST_KEY][i]),
            "response_token_ids": responses[i, :n].tolist(),
            "reward": float(outcome[i]),
        }
        if masks is not None:
            rollout["response_mask"] = [int(v) for v in masks[i, :n].tolist()]
        groups.setdefault(uid, []).append((i, rollout))
    results = _run(_judge_all(groups, client))
    credit = np.array(batch.non_tensor_batch[CREDIT_KEY], dtype=object)
    status = np.array(statuses, dtype=object)
    for i, result in results.items():
        credit[i], status[i] = _credit_and_status(result)
    batch.non_tensor_batch[CREDIT_KEY], batch.non_tensor_batch[STATUS_KEY] = credit, status
    return batch


# The driver's watches, by the environment that configured them (tests and notebooks
# change it between runs in one process); each holds its client.
_WATCHES: dict[tuple[str, str, int, bool], tuple[DriftWatch, JudgeClient]] = {}


def watch_drift(batch: DataProto, client: JudgeClient | None = None) -> DataProto:
    """On the driver, once per judged batch: every ``JUDGE_DRIFT_EVERY`` steps (default 50,
    0: never) ask the service's drift audit, log the verdict and put it in
    ``batch.meta_info["judge_drift"]`` (0 ok, 1 drifting, 2 bad); with
    ``JUDGE_STOP_ON_BAD=1`` a bad verdict raises ``JudgeDriftError`` (the run stops before
    the step trains). A batch the judge never saw passes untouched."""
    if STATUS_KEY not in batch.non_tensor_batch:
        return batch
    url = os.environ.get("JUDGE_URL") or ""
    every = int(os.environ.get("JUDGE_DRIFT_EVERY") or 50)
    stop = os.environ.get("JUDGE_STOP_ON_BAD", "").lower() in ("1", "true", "yes")
    key = (url, os.environ.get("JUDGE_API_KEY") or "", every, stop)
    if key not in _WATCHES:
        made = JudgeClient(url, api_key=key[1] or None) if url else client
        if made is None:  # neither JUDGE_URL nor a client: nobody to ask
            return batch
        _WATCHES[key] = (DriftWatch(every, stop_on_bad=stop), made)
    watch, known = _WATCHES[key]
    level = watch.check(client or known, int(batch.meta_info.get("global_steps", 0)))
    if level is not None:
        batch.meta_info["judge_drift"] = level
    return batch


def _run(work: Coroutine[Any, Any, dict[int, Result]]) -> dict[int, Result]:
    """`work` to completion from synchronous code, also where an event loop is already
    running in this thread (then in a thread of its own)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, work).result()


async def _judge_all(
    groups: dict[str, list[tuple[int, dict[str, Any]]]], client: AsyncJudgeClient | None
) -> dict[int, Result]:
    fields = json.loads(os.environ.get("JUDGE_OPTIONS") or "{}")
    # One string per sample (numpy-safe); /v1/judge/group judges one group and /v1/judge
    # refuses the option.
    options = Options.model_validate(
        {**fields, "credit_encoding": "base64-f32", "groupwise": False}
    )
    own = client is None
    if client is None:
        url = os.environ.get("JUDGE_URL")
        if not url:
            raise ValueError("groupwise judging on the driver needs JUDGE_URL in its environment")
        client = AsyncJudgeClient(url, api_key=os.environ.get("JUDGE_API_KEY"), timeout=600.0)
    try:
        judged = await asyncio.gather(
            *(_judge_uid(client, options, uid, members) for uid, members in groups.items())
        )
    finally:
        if own:
            await client.aclose()
    return {i: result for part in judged for i, result in part}


async def _judge_uid(
    client: AsyncJudgeClient,
    options: Options,
    uid: str,
    members: list[tuple[int, dict[str, Any]]],
) -> list[tuple[int, Result]]:
    rollouts = [
        {**rollout, "id": f"{uid}-{k}", "group_id": uid} for k, (_, rollout) in enumerate(members)
    ]
    rows = [i for i, _ in members]
    if len(rollouts) > 1:
        try:
            results = (await client.judge_group(rollouts, options)).results
            return list(zip(rows, results, strict=True))
        except ClientRequestError as exc:  # a 4xx: a group over the limits, ...
            log.warning("group %s judged sample by sample: %s", uid, exc)
    alone = await asyncio.gather(*(_alone(client, options, r) for r in rollouts))
    return list(zip(rows, alone, strict=True))


async def _alone(client: AsyncJudgeClient, options: Options, rollout: dict[str, Any]) -> Result:
    """One sample's own 4xx fails that sample, not its siblings."""
    try:
        return await client.judge(rollout, options)
    except ClientRequestError as exc:
        return Result(id=rollout["id"], status="failed", error=str(exc))
