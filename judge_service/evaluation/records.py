"""Reading an eval file: ProcessBench records and gold-span records, one JSON object a line.

* ProcessBench (https://huggingface.co/datasets/Qwen/ProcessBench): ``id``,
  ``problem``, ``steps`` (strings), ``label`` (index of the first wrong step, -1
  when every step is right), optionally ``final_answer_correct``; other fields
  (the dataset's ``generator``) are ignored. The steps become one rollout
  (`segment.segment_steps`), encoded with ``--tokenizer``.
* gold spans: a rollout as the API takes it (`schemas.Rollout`) plus ``spans``,
  each ``{start, end, label}`` in tokens of its ids, end exclusive (``{"rollout":
  {...}, "spans": [...]}`` is read too).

A file may mix both. Every bad line is reported before anything is judged (a
judge run on a broken gold file measures nothing), each error naming its line
and field.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from judge_service.bounds import Id, Text
from judge_service.errors import InputError, RecordsError, UnavailableError
from judge_service.evaluation.segment import Segmented, segment_steps
from judge_service.labels import DEFAULT_LABEL_SCORES
from judge_service.schemas import Rollout
from judge_service.trace.detokenize import LoadedTokenizer

M = TypeVar("M", bound=BaseModel)


class ProcessBenchRecord(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: Id
    problem: Text = ""
    steps: list[str] = Field(min_length=1)
    label: int = Field(ge=-1, description="The first wrong step, -1 when none is.")
    final_answer_correct: bool | None = None
    # Not ProcessBench's own fields: a dataset's reference solution and answer, written
    # onto the records by whoever has them (examples/real/: GSM8K's), read as a rollout's.
    reference_solution: Text | None = None
    reference_answer: Text | None = None

    @field_validator("label")
    @classmethod
    def _label_is_a_step(cls, label: int, info: ValidationInfo) -> int:
        steps = info.data.get("steps")
        if steps is not None and label >= len(steps):
            raise ValueError(
                f"label {label} is not a step: there are {len(steps)} steps "
                "(label is the index of the first wrong step, or -1)"
            )
        return label


class GoldSpan(BaseModel):
    model_config = ConfigDict(extra="ignore")

    start: int = Field(ge=0)
    end: int
    label: str

    @field_validator("end")
    @classmethod
    def _after_start(cls, end: int, info: ValidationInfo) -> int:
        start = info.data.get("start")
        if start is not None and end <= start:
            raise ValueError(f"end {end} must exceed start {start} (end is exclusive)")
        return end

    @field_validator("label")
    @classmethod
    def _known(cls, label: str) -> str:
        if label not in DEFAULT_LABEL_SCORES:
            raise ValueError(f"label {label!r} is not one of {', '.join(DEFAULT_LABEL_SCORES)}")
        return label


@dataclass(frozen=True)
class Case:
    """One record to judge: its rollout and what the judge's result is scored against."""

    line: int
    rollout: Rollout
    label: int | None = None  # ProcessBench: the first wrong step, -1 for none
    segmented: Segmented | None = None  # ProcessBench: the steps' token ranges
    gold: tuple[GoldSpan, ...] | None = None  # gold-span records

    @property
    def kind(self) -> str:
        return "processbench" if self.label is not None else "spans"


def read_cases(
    path: Path,
    tokenizer_for: Callable[[str], LoadedTokenizer],
    *,
    tokenizer: str | None,
    with_verdict: bool = False,
    with_reference: bool = True,
) -> list[Case]:
    """The file's records as cases, in file order. `tokenizer` encodes ProcessBench steps and
    is the tokenizer of gold-span rollouts that name none; `with_verdict` passes ProcessBench's
    ``final_answer_correct`` to the judge as the reward (1.0 / 0.0); `with_reference` passes a
    record's ``reference_solution`` and ``reference_answer`` (False: the judge alone)."""
    cases: list[Case] = []
    errors: list[str] = []
    seen: dict[str, int] = {}
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                case = _read_line(
                    number, line, tokenizer_for, tokenizer, with_verdict, with_reference
                )
            except InputError as exc:
                errors.append(f"{exc.field}: {exc.message}")
                continue
            except UnavailableError as exc:
                errors.append(f"{exc.field}: {exc}")
                continue
            first = seen.setdefault(case.rollout.id, number)
            if first != number:
                errors.append(f"line {number}.id: {case.rollout.id!r} is on line {first} too")
                continue
            cases.append(case)
    if errors:
        raise RecordsError(errors)
    if not cases:
        raise RecordsError([f"{path}: no records"])
    return cases


def check_records(path: Path) -> int:
    """The number of records in `path`, each checked for its shape without a tokenizer (a
    canary file at settings load); RecordsError names every bad line."""
    errors: list[str] = []
    count = 0
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise RecordsError([f"{path}: cannot read: {exc.strerror or exc}"]) from None
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                raw = _json_object(number, line)
                if "steps" in raw:
                    _parse(ProcessBenchRecord, raw, f"line {number}")
                elif "spans" in raw:
                    _gold_case(number, raw, None)
                else:
                    raise InputError(_NEITHER, field=f"line {number}")
            except InputError as exc:
                errors.append(f"{exc.field}: {exc.message}")
            count += 1
    if errors:
        raise RecordsError(errors)
    if not count:
        raise RecordsError([f"{path}: no records"])
    return count


_NEITHER = "neither a ProcessBench record (no `steps`) nor a gold-span record (no `spans`)"


def _json_object(number: int, line: str) -> dict[str, Any]:
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc}", field=f"line {number}") from None
    if not isinstance(raw, dict):
        raise InputError("expected a JSON object", field=f"line {number}")
    return raw


def _read_line(
    number: int,
    line: str,
    tokenizer_for: Callable[[str], LoadedTokenizer],
    tokenizer: str | None,
    with_verdict: bool,
    with_reference: bool = True,
) -> Case:
    where = f"line {number}"
    raw = _json_object(number, line)
    if "steps" in raw:
        record = _parse(ProcessBenchRecord, raw, where)
        if not with_reference:
            dropped = {"reference_solution": None, "reference_answer": None}
            record = record.model_copy(update=dropped)
        return _processbench_case(number, record, tokenizer_for, tokenizer, with_verdict)
    if "spans" in raw:
        return _gold_case(number, raw, tokenizer)
    raise InputError(_NEITHER, field=where)


def _processbench_case(
    number: int,
    record: ProcessBenchRecord,
    tokenizer_for: Callable[[str], LoadedTokenizer],
    tokenizer: str | None,
    with_verdict: bool,
) -> Case:
    where = f"line {number}"
    if not tokenizer:
        raise InputError(
            "a ProcessBench record is turned into token ids with --tokenizer "
            "(or JUDGE_DEFAULT_TOKENIZER); neither is set",
            field=f"{where}.steps",
        )
    segmented = segment_steps(tokenizer_for(tokenizer), record.steps, where)
    reward = None
    if with_verdict and record.final_answer_correct is not None:
        reward = 1.0 if record.final_answer_correct else 0.0
    rollout = Rollout(
        id=record.id,
        problem=record.problem,
        response_token_ids=segmented.token_ids,
        tokenizer=tokenizer,
        reward=reward,
        reference_solution=record.reference_solution,
        reference_answer=record.reference_answer,
    )
    return Case(number, rollout, label=record.label, segmented=segmented)


def _gold_case(number: int, raw: dict[str, Any], tokenizer: str | None) -> Case:
    where = f"line {number}"
    fields = dict(raw["rollout"]) if isinstance(raw.get("rollout"), dict) else dict(raw)
    spans_raw = raw["spans"] if "spans" in raw else fields.get("spans")
    fields.pop("spans", None)
    if not isinstance(spans_raw, list):
        raise InputError("expected a list of {start, end, label}", field=f"{where}.spans")
    rollout = _parse(Rollout, fields, where)
    if rollout.tokenizer is None and tokenizer:
        rollout = rollout.model_copy(update={"tokenizer": tokenizer})
    total = len(rollout.response_token_ids)
    gold = []
    for index, item in enumerate(spans_raw):
        span = _parse(GoldSpan, item, f"{where}.spans[{index}]")
        if span.end > total:
            raise InputError(
                f"end {span.end} is past the rollout's {total} tokens",
                field=f"{where}.spans[{index}].end",
            )
        gold.append(span)
    return Case(number, rollout, gold=tuple(gold))


def _parse(model: type[M], raw: Any, where: str) -> M:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(p) for p in first["loc"])
        field = f"{where}.{path}" if path else where
        message = str(first["msg"]).removeprefix("Value error, ")
        raise InputError(message, field=field) from None
