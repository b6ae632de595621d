"""``options.judge`` to a `Judge`: ``rules``, ``anthropic:<model>``, ``openai:<model>``,
``value:<model>`` (methods/value.py)."""

from __future__ import annotations

from collections.abc import Callable

from judge_service.config import Settings
from judge_service.errors import InputError
from judge_service.judges.base import Judge

# A factory takes the part after the colon (the model; "" for none) and the settings.
JudgeFactory = Callable[[str, Settings], Judge]


def _rules(model: str, settings: Settings) -> Judge:
    from judge_service.judges.rules.rules_judge import RulesJudge

    if model:
        raise InputError("the rules judge takes no model", field="options.judge")
    from judge_service.resolve import span_limits

    return RulesJudge(span_limits(settings))


def _anthropic(model: str, settings: Settings) -> Judge:
    from judge_service.judges.llm.llm_judge import build_llm_judge

    return build_llm_judge("anthropic", model, settings)


def _openai(model: str, settings: Settings) -> Judge:
    from judge_service.judges.llm.llm_judge import build_llm_judge

    return build_llm_judge("openai", model, settings)


def _value(model: str, settings: Settings) -> Judge:
    from judge_service.methods.value import ValueJudge

    return ValueJudge(model, settings)


FACTORIES: dict[str, JudgeFactory] = {
    "rules": _rules,
    "anthropic": _anthropic,
    "openai": _openai,
    "value": _value,
}


def build_judge(spec: str, settings: Settings) -> Judge:
    kind, _, model = spec.partition(":")
    factory = FACTORIES.get(kind)
    if factory is None:
        known = ", ".join(k if k == "rules" else f"{k}:<model>" for k in FACTORIES)
        raise InputError(f"unknown judge {spec!r}; use one of: {known}", field="options.judge")
    return factory(model, settings)
