"""The judge's prompts: loaded from ``prompts/<version>/``, rendered, and versioned.

The rendered system text (instructions + rubric) depends only on the prompt
files and the request's label set, and the context (problem, verdict,
references, marked trace) only on the rollout, so both are byte-identical on
every turn of a session and the system text across rollouts: that is the
prefix the providers cache. The version string carries a digest of the files
and of the tool schemas, so a wording change can never be served from a cache
entry made with other wording.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from string import Template

from judge_service.errors import InputError
from judge_service.judges.base import JudgeRequest
from judge_service.judges.llm.conversation import ToolSpec
from judge_service.validate import ValidationReport

# Each file and the placeholders it must accept; checked at load so a typo fails fast.
PLACEHOLDERS: Mapping[str, tuple[str, ...]] = {
    "instructions": (),
    "rubric": ("label_table",),
    "context": (
        "problem",
        "final_answer",
        "verdict",
        "references",
        "num_tokens",
        "fence",
        "trace",
        "max_turns",
        "max_tool_calls",
        "deadline_s",
    ),
    "repair": (
        "accepted",
        "rejected",
        "reasons",
        "repair_turns",
        "repair_tool_calls",
        "repair_tools",
    ),
    "nudge": (),
    "budget": ("max_tool_calls",),
    "repair_budget": ("repair_tool_calls", "repair_tools"),
    "cutoff": ("max_tokens",),
}
# Files a prompt version may have; where it lacks one, the package's v1 file is used.
# They are hashed apart (`PromptSet.extra_digest`): the group session's wording does not
# change the cache key of rollouts judged alone.
OPTIONAL: Mapping[str, tuple[str, ...]] = {
    "group_context": (
        "problem",
        "references",
        "num_rollouts",
        "verdicts",
        "fence",
        "group",
        "hints",
        "max_turns",
        "max_tool_calls",
        "deadline_s",
    ),
}
# The prompts ship inside the package: the checkout's top-level prompts/ is the package
# judge_service.prompts (pyproject.toml's package-dir), its files package data, so a wheel
# installed anywhere and the editable install both find them through the import system.
# JUDGE_LLM_PROMPTS_DIR points elsewhere to try other wording without a reinstall.
DEFAULT_PROMPTS_DIR = Path(str(files("judge_service.prompts")))


def default_prompts_dir() -> Path:
    return DEFAULT_PROMPTS_DIR


def canonical_json(value: object) -> str:
    """Deterministic JSON: sorted keys, no spaces, unicode kept (what the digests hash)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def fence_id(text: str) -> str:
    """A fence id derived from the trace: stable across turns, not forgeable from inside it."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _names(tools: Sequence[str]) -> str:
    return " or ".join(tools) if tools else "no tool"


def _verdict(reward: float | None) -> str:
    if reward is None:
        return "No verdict was given for this rollout."
    outcome = "passed (the final answer was accepted)" if reward > 0 else "failed"
    return f"Reward {reward:g}: the rollout {outcome}."


@dataclass(frozen=True)
class PromptSet:
    version: str  # the directory name, e.g. "v1"
    templates: Mapping[str, Template]
    digest: str  # sha256 of every file, in PLACEHOLDERS order
    extra_digest: str = ""  # sha256 of the OPTIONAL files, in order

    @classmethod
    def load(cls, version: str = "v1", directory: Path | str | None = None) -> PromptSet:
        root = Path(directory) if directory is not None else default_prompts_dir()
        folder = root / version
        if not folder.is_dir():
            raise InputError(f"no prompt directory {folder}", field="settings.llm_prompt_version")
        hasher = hashlib.sha256()
        templates: dict[str, Template] = {}
        extra = hashlib.sha256()
        for name, fields in [*PLACEHOLDERS.items(), *OPTIONAL.items()]:
            path = folder / f"{name}.md"
            if name in OPTIONAL and not path.is_file():
                path = DEFAULT_PROMPTS_DIR / "v1" / f"{name}.md"
            if not path.is_file():
                raise InputError(
                    f"prompt {path} is missing: a prompt version needs "
                    f"{', '.join(f'{n}.md' for n in PLACEHOLDERS)}",
                    field="settings.llm_prompt_version",
                )
            text = path.read_text(encoding="utf-8").rstrip("\n")
            (extra if name in OPTIONAL else hasher).update(
                name.encode() + b"\0" + text.encode() + b"\0"
            )
            templates[name] = Template(text)
            try:
                templates[name].substitute(dict.fromkeys(fields, ""))
            except (KeyError, ValueError) as exc:
                raise InputError(
                    f"prompt {folder / name}.md: bad placeholder {exc} (write $$ for a dollar)",
                    field="settings.llm_prompt_version",
                ) from exc
        return cls(version, templates, hasher.hexdigest(), extra.hexdigest())

    def version_for(self, tools: Sequence[ToolSpec]) -> str:
        """``<dir>.<digest>``: the files and the tool schemas the model is shown."""
        specs = [
            {"name": t.name, "description": t.description, "parameters": t.parameters}
            for t in sorted(tools, key=lambda t: t.name)
        ]
        digest = hashlib.sha256((self.digest + canonical_json(specs)).encode()).hexdigest()
        return f"{self.version}.{digest[:10]}"

    def _render(self, name: str, **values: object) -> str:
        return self.templates[name].substitute({k: str(v) for k, v in values.items()})

    def system_text(self, label_scores: Mapping[str, float]) -> str:
        table = "\n".join(f"- {label}: {score:+g}" for label, score in label_scores.items())
        return self._render("instructions") + "\n\n" + self._render("rubric", label_table=table)

    def context_text(self, request: JudgeRequest) -> str:
        references = ""
        if request.reference_answer is not None:
            references += f"\n# Reference answer\n{request.reference_answer}\n"
        if request.reference_solution is not None:
            references += f"\n# Reference solution\n{request.reference_solution}\n"
        return self._render(
            "context",
            problem=request.problem or "(not given)",
            final_answer=(
                request.final_answer if request.final_answer is not None else "(none found)"
            ),
            verdict=_verdict(request.reward),
            references=references,
            num_tokens=request.trace.num_tokens,
            fence=fence_id(request.view.text),
            trace=request.view.text,
            # The session's budget: fixed for the rollout, so the context stays byte-stable.
            max_turns=request.limits.max_turns,
            max_tool_calls=request.limits.max_tool_calls,
            deadline_s=f"{request.limits.deadline_s:g}",
        )

    def render(self, name: str, **values: object) -> str:
        """Template `name` (e.g. an OPTIONAL one) with `values` substituted."""
        return self._render(name, **values)

    def repair_text(
        self, report: ValidationReport, *, turns: int, tool_calls: int, tools: Sequence[str]
    ) -> str:
        return self._render(
            "repair",
            accepted=len(report.accepted),
            rejected=len(report.rejected),
            reasons=report.reasons_text(),
            repair_turns=turns,
            repair_tool_calls=tool_calls,
            repair_tools=_names(tools),
        )

    def repair_budget_text(self, tool_calls: int, tools: Sequence[str]) -> str:
        return self._render(
            "repair_budget", repair_tool_calls=tool_calls, repair_tools=_names(tools)
        )

    def cutoff_text(self, max_tokens: int) -> str:
        return self._render("cutoff", max_tokens=max_tokens)

    def nudge_text(self) -> str:
        return self._render("nudge")

    def budget_text(self, max_tool_calls: int) -> str:
        return self._render("budget", max_tool_calls=max_tool_calls)
