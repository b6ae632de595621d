"""TRL: ``JudgeCreditGRPOTrainer``, a ``GRPOTrainer`` whose advantages carry the judge's
per-token credit.

TRL has no per-token reward hook (trl#4525: "subclass GRPOTrainer and override only that
one method"), so this subclass overrides ``_generate_and_score_completions``: after TRL has
generated, rewarded and group-normalised, it sends each completion's token ids to the
service and returns ``advantages = A_i[:, None] + credit * loss_mask``, shape (B, T).
``_compute_loss`` takes (B, T) advantages as they are (TRL unsqueezes only 1-D ones), and
TRL's buffering splits batches along dim 0 only, so the (B, T) tensor reaches the loss.

Layout, as TRL builds it (trl/trainer/grpo_trainer.py, 1.16):

* completions are right-padded with ``pad_token_id``; ``completion_mask`` is 1 on each
  completion's own tokens, its sampled EOS included, so ``completion_mask.sum(1)`` is the
  completion's length even where ``pad_token_id == eos_token_id``;
* ``mask_truncated_completions=True`` zeroes a truncated row's mask: such a row gets no
  loss, hence no credit, and is not sent to the judge at all;
* multi-turn tool output (``tool_mask``, or a ``rollout_func``'s ``env_mask``) stays in the
  completion with mask 0: it is sent as the rollout's ``response_mask``, so the judge reads it
  as context and returns 0 credit there.

Groups can span processes in TRL, so the group baseline is TRL's ``A_i`` and the service
is asked for ``credit`` only; each process judges its own completions. Settings: Dr. GRPO
(``scale_rewards="none"``, ``loss_type="dr_grpo"``) so that ``A_i`` and credit share one
scale; anything else is refused unless ``require_dr_grpo=False`` (then a warning): dividing
``A_i`` by a group's std (or a length) while credit stays as the judge gave it makes the
judge's weight change from group to group. ``use_liger_kernel`` is refused: TRL hands the
advantages straight to the Liger loss, whose (B, T) support is unverified.

Metrics (in the trainer's logs, averaged per logging step like TRL's own):
``judge/share`` = Σ|credit| / (Σ_i |A_i|·n_i + Σ|credit|) over the masked tokens of the
batch (all processes), ``judge/fallback`` and ``judge/failed`` (results per step), and
``judge/credit_abs_mean`` (mean |credit| per masked token), and ``judge/drift`` (the
service's drift verdict, every ``judge_drift_every`` steps: 0 ok, 1 drifting, 2 bad).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping
from typing import Any, Literal

import torch
from trl.trainer.grpo_trainer import GRPOTrainer

from judge_service_client.client import JudgeClient
from judge_service_client.client.arrays import to_padded
from judge_service_client.integrations.drift import DriftWatch
from judge_service_client.schemas import BatchResponse, Options

log = logging.getLogger(__name__)

__all__ = ["JudgeCreditGRPOTrainer"]


class JudgeCreditGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer(...)`` plus the judge: pass ``judge_url`` (or a ``judge_client``) and
    ``judge_options`` (the API's options: judge, lambda, kappa, ...).

    judge_tokenizer: the tokenizer name the service loads to read the ids; default the
        trainer's tokenizer's ``name_or_path`` (a hub id, or a local directory, which the
        server must allow with JUDGE_TOKENIZER_ROOTS).
    reference_column: the dataset column sent as each rollout's ``reference_answer``
        when present.
    judge_errors: "raise" (default) stops training when the service cannot be reached;
        "zero" trains that step on TRL's advantages alone and counts ``judge/errors``.
    judge_in_eval: also judge evaluation batches (off: their advantages are not trained on).
    judge_drift_every: ask the service's drift audit every this many steps (0: never); the
        verdict is logged and in the metrics as ``judge/drift`` (0 ok, 1 drifting, 2 bad).
    judge_stop_on_bad: raise ``JudgeDriftError`` (ending the run) when the verdict is bad.

    With ``judge_options={"groupwise": True}`` each prompt's ``num_generations``
    completions are judged as one group (divergence points, equal-reward scores).
    """

    def __init__(
        self,
        *args: Any,
        judge_url: str | None = None,
        judge_options: Options | Mapping[str, Any] | None = None,
        judge_client: JudgeClient | None = None,
        judge_api_key: str | None = None,
        judge_timeout: float = 600.0,
        judge_tokenizer: str | None = None,
        reference_column: str = "reference_answer",
        judge_errors: Literal["raise", "zero"] = "raise",
        judge_in_eval: bool = False,
        require_dr_grpo: bool = True,
        judge_drift_every: int = 50,
        judge_stop_on_bad: bool = False,
        **kwargs: Any,
    ) -> None:
        if judge_client is None and not judge_url:
            raise ValueError("JudgeCreditGRPOTrainer needs judge_url (or judge_client)")
        if judge_errors not in ("raise", "zero"):
            raise ValueError(f"judge_errors must be 'raise' or 'zero', not {judge_errors!r}")
        drift = DriftWatch(judge_drift_every, stop_on_bad=judge_stop_on_bad)
        options = judge_options if isinstance(judge_options, Options) else None
        if options is None:
            fields = dict(judge_options or {})
            fields.setdefault("credit_encoding", "base64-f32")  # the compact form; all decode
            options = Options.model_validate(fields)
        given = kwargs.get("args", args[2] if len(args) > 2 else None)
        if given is not None:  # refused before the model loads
            _check_settings(given, require_dr_grpo)
        super().__init__(*args, **kwargs)
        if given is None:  # TRL's default config (scale_rewards="group")
            _check_settings(self.args, require_dr_grpo)
        self.judge_client = judge_client or JudgeClient(
            str(judge_url), api_key=judge_api_key, timeout=judge_timeout
        )
        self.judge_options = options
        name = judge_tokenizer or getattr(self._tokenizer, "name_or_path", None)
        self.judge_tokenizer: str | None = str(name) if name else None
        self.reference_column = reference_column
        self.judge_errors = judge_errors
        self.judge_in_eval = judge_in_eval
        self.judge_drift = drift
        # The last batch the service judged, with the rows of the local batch it covers
        # (spans, labels, credit), for callbacks and logging; TRL keeps only the tensors.
        self.last_judged: tuple[list[int], BatchResponse] | None = None

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output: dict[str, Any] = super()._generate_and_score_completions(inputs)
        mode = "train" if getattr(self.model, "training", False) else "eval"
        if mode == "eval" and not self.judge_in_eval:
            return output
        completion_mask: torch.Tensor = output["completion_mask"]
        tool_mask: torch.Tensor | None = output.get("tool_mask")
        loss_mask = completion_mask if tool_mask is None else completion_mask * tool_mask
        advantages: torch.Tensor = output["advantages"]
        credit, counts = self._credit(inputs, output["completion_ids"], completion_mask, tool_mask)
        credit = credit.to(device=advantages.device, dtype=advantages.dtype) * loss_mask
        output["advantages"] = advantages.unsqueeze(1) + credit
        self._log_judge(mode, advantages, credit, loss_mask, counts)
        if mode == "train":
            # Before this step's advantages train: a bad judge stops the run here.
            level = self.judge_drift.check(self.judge_client, self.state.global_step)
            if level is not None:
                self._metrics[mode]["judge/drift"].append(level)
        return output

    def _credit(
        self,
        inputs: list[dict[str, Any]],
        completion_ids: torch.Tensor,
        completion_mask: torch.Tensor,
        tool_mask: torch.Tensor | None,
    ) -> tuple[torch.Tensor, dict[str, int]]:
        """(B, T) credit on the completions' layout (0 on padding and unjudged rows)."""
        batch, width = completion_ids.shape
        credit = torch.zeros((batch, width), dtype=torch.float32)
        counts = {"fallback": 0, "failed": 0, "errors": 0}
        lengths = completion_mask.sum(dim=1).tolist()
        # A row whose mask is all 0 (a masked truncated completion) gets no loss: skip it.
        live = [i for i in range(batch) if lengths[i] > 0]
        if not live:
            return credit, counts
        ids = completion_ids.cpu()
        step, rank = self.state.global_step, self.accelerator.process_index
        rollouts = []
        for i in live:
            n = int(lengths[i])
            rollout: dict[str, Any] = {
                "id": f"{step}-{rank}-{i}",
                "response_token_ids": ids[i, :n].tolist(),
                "problem": _problem_text(inputs[i].get("prompt")),
            }
            if self.judge_tokenizer:
                rollout["tokenizer"] = self.judge_tokenizer
            reference = inputs[i].get(self.reference_column)
            if isinstance(reference, str) and reference:
                rollout["reference_answer"] = reference
            if tool_mask is not None:
                rollout["response_mask"] = tool_mask[i, :n].int().tolist()
            if self.judge_options.groupwise:
                # TRL lays each prompt's num_generations completions side by side in the
                # global batch, whose slice of batch rows this process holds: a group cut
                # by a process boundary is judged as the part each process sees.
                group = (rank * batch + i) // self.num_generations
                rollout["group_id"] = f"{step}-{group}"
            rollouts.append(rollout)
        try:
            response = self.judge_client.judge_batch(rollouts, self.judge_options)
        except Exception:
            if self.judge_errors == "raise":
                raise
            log.warning("judge call failed; this step trains on TRL's advantages", exc_info=True)
            counts["errors"] = len(live)
            return credit, counts
        self.last_judged = (live, response)
        for i, result in zip(live, response.results, strict=True):
            if result.status == "failed":  # to_padded gives it a row of zeros
                counts["failed"] += 1
            elif result.num_tokens != lengths[i]:
                raise RuntimeError(
                    f"the judge read {result.num_tokens} tokens in completion {i}, which has "
                    f"{lengths[i]}: the service's tokenizer ({self.judge_tokenizer!r}) is not "
                    "the trainer's; set judge_tokenizer"
                )
            counts["fallback"] += result.status == "fallback"
        dense = to_padded(response.results, lengths=[lengths[i] for i in live], max_len=width)
        credit[live] = torch.from_numpy(dense)
        return credit, counts

    def _log_judge(
        self,
        mode: str,
        advantages: torch.Tensor,
        credit: torch.Tensor,
        loss_mask: torch.Tensor,
        counts: dict[str, int],
    ) -> None:
        mask = loss_mask.to(credit.dtype)
        local = torch.tensor(
            [
                float(credit.abs().sum()),
                float((advantages.abs() * mask.sum(dim=1)).sum()),
                float(mask.sum()),
                counts["fallback"],
                counts["failed"],
                counts["errors"],
            ],
            dtype=torch.float64,
            device=advantages.device,
        )
        total = self.accelerator.gather(local).view(-1, local.numel()).sum(dim=0).tolist()
        judge_mass, outcome_mass, tokens, fallback, failed, errors = total
        metrics = self._metrics[mode]
        # 0 when neither A_i nor credit moved anything: the judge added nothing.
        mass = judge_mass + outcome_mass
        metrics["judge/share"].append(judge_mass / mass if mass > 0 else 0.0)
        if tokens > 0:
            metrics["judge/credit_abs_mean"].append(judge_mass / tokens)
        metrics["judge/fallback"].append(fallback)
        metrics["judge/failed"].append(failed)
        if errors:
            metrics["judge/errors"].append(errors)


def _check_settings(args: Any, require_dr_grpo: bool) -> None:
    if getattr(args, "use_liger_kernel", False):
        raise ValueError(
            "JudgeCreditGRPOTrainer: use_liger_kernel=True is not supported (the Liger loss "
            "takes the advantages as they are; its (B, T) support is unverified)"
        )
    wrong = [
        f"{name}={getattr(args, name, None)!r} (want {want!r})"
        for name, want in (
            ("scale_rewards", "none"),
            ("loss_type", "dr_grpo"),
            ("multi_objective_aggregation", "sum_then_normalize"),
        )
        if getattr(args, name, want) != want
    ]
    if not wrong:
        return
    message = (
        "JudgeCreditGRPOTrainer adds unscaled credit to A_i, so it needs Dr. GRPO settings: "
        + ", ".join(wrong)
    )
    if require_dr_grpo:
        raise ValueError(message + "; pass require_dr_grpo=False to train anyway")
    warnings.warn(message, stacklevel=3)


def _problem_text(prompt: Any) -> str:
    """The prompt as text: a plain prompt, or the last user turn of a conversation."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        for message in reversed(prompt):
            if isinstance(message, dict) and message.get("role") == "user":
                content = message.get("content")
                if isinstance(content, str):
                    return content
                if isinstance(content, list):  # typed content blocks
                    return "".join(
                        str(part.get("text", "")) for part in content if isinstance(part, dict)
                    )
    return ""
