"""``judge-service judge --groupwise``: the lines that share a `group_id` judged as one group
(as ``/v1/judge/group`` judges them), however far apart they stand in the file.

The group is judged once, when the writer first needs one of its lines, and every line
of it takes its own result from there, so the output stays in input order. The first
read of the file keeps only where each group's lines are (line number, byte offset); a
group's rollouts are read again when it is judged, and its results are dropped once its
last line is written, so memory holds the groups being judged, not the file. On a
resumed run a group with lines still to write is judged whole again: a group's credit
depends on all of its members.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from judge_service.jsonl import json_line_at, json_lines_at

if TYPE_CHECKING:
    from judge_service.pipeline import Engine
    from judge_service.schemas import Options, Result, Rollout


def read_groups(path: Path) -> dict[str, list[tuple[int, int]]]:
    """Each group_id with more than one readable line: its (line number, byte offset)."""
    from judge_service.schemas import Rollout

    found: dict[str, list[tuple[int, int]]] = {}
    for number, offset, item, error in json_lines_at(path):
        if error is not None or not isinstance(item, dict):
            continue
        try:
            rollout = Rollout.model_validate(item)
        except ValidationError:
            continue
        if rollout.group_id is not None:
            found.setdefault(rollout.group_id, []).append((number, offset))
    return {g: members for g, members in found.items() if len(members) > 1}


class Groups:
    """The file's groups, each judged at most once per run."""

    def __init__(self, engine: Engine, options: Options, path: Path) -> None:
        self.engine, self.options, self.path = engine, options, path
        self.members = read_groups(path)
        self._runs: dict[str, asyncio.Task[dict[int, Result]]] = {}
        self._left: dict[str, int] = {g: len(m) for g, m in self.members.items()}

    def holds(self, number: int, rollout: Rollout | None) -> bool:
        """Whether this line is judged with its group."""
        if rollout is None or rollout.group_id not in self.members:
            return False
        return any(n == number for n, _ in self.members[rollout.group_id])

    async def result(self, number: int, rollout: Rollout) -> Result:
        group_id = rollout.group_id
        assert group_id is not None
        run = self._runs.get(group_id)
        if run is None:
            run = self._runs[group_id] = asyncio.create_task(self._judge(group_id))
        result = (await run)[number]
        self._left[group_id] -= 1
        if not self._left[group_id]:  # its last line: the group's results can go
            del self._runs[group_id]
        return result

    async def _judge(self, group_id: str) -> dict[int, Result]:
        from judge_service.errors import InputError
        from judge_service.group.judge import check_group, judging
        from judge_service.schemas import Result, Rollout

        numbers = [n for n, _ in self.members[group_id]]
        rollouts = [
            Rollout.model_validate(json_line_at(self.path, offset))
            for _, offset in self.members[group_id]
        ]
        fields = [f"line {n}" for n in numbers]
        try:
            check_group(rollouts, self.engine, fields)
        except InputError as exc:
            error = f"{exc.field}: {exc.message}"
            pairs = zip(numbers, rollouts, strict=True)
            return {n: Result(id=r.id, status="failed", error=error) for n, r in pairs}
        done = await judging(self.engine, rollouts, self.options, fields)
        return {n: result for n, (result, _) in zip(numbers, done.judged, strict=True)}
