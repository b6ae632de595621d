"""A group member's result stored in bounded parts (the Redis job store, `jobs.group_queue`).

Redis runs one command at a time, and copying a value holds it up to about a millisecond
a megabyte (bench/bench_group_write.py). A result of a rollout at JUDGE_MAX_TOKENS_PER_
ROLLOUT in the dense encoding is about 5.4 MB, so one HSET of it held Redis about 3 ms,
11 ms on a loaded machine. So a result longer than PART_BYTES is cut into parts of at most
PART_BYTES: the parts go to the job's `parts` hash (fields ``<index>.<k>``) and the
result's field in `out` holds only a marker, ``*<number of parts>`` (a result is JSON, an
object, and the cancelled marker is ``C``: neither begins with ``*``). Every write and
every read then moves at most a few parts per command.

A member's parts are written only by its group's holder (WATCH on the group's `hold`):
the marker, and the count of parts in the `nparts` hash, with the first part (so that
whatever drops the result finds every part written so far), the writer's tag with the
last (a tagged result has all its parts). Whatever replaces a result drops the parts it
does not overwrite: a holder's write, those of the result written before it (an earlier
holder's, taken over: BEGIN leaves them, as dropping a whole group in one call would
free up to JUDGE_MAX_TOKENS_PER_GROUP of results at once); RELEASE and FINISH_GROUP's
given results (a cancel, a dead letter) all of them (`DROP`). The `parts` and `nparts`
hashes expire with the results, so no part outlives its result.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

# Bytes (characters: results are JSON, nearly all ASCII) per part, and result bytes per
# write transaction (`write_members`: it holds Redis for all its commands, so it is
# bounded as one call) and per read command: a call of a megabyte holds Redis 0.1 to 1 ms
# (p95 about 1 ms on a loaded 2-core machine: bench/bench_group_write.py), well within
# the 5 ms every call must stay under.
PART_BYTES = 512 << 10
CALL_BYTES = 1 << 20
MARK = "*"

# Lua: drops the parts of result `i` (`nparts` counts them; none for a whole result).
DROP = """
local function drop(parts, nparts, i)
  local n = tonumber(redis.call('HGET', nparts, i) or '0')
  for k = 0, n - 1 do redis.call('HDEL', parts, i .. '.' .. k) end
  if n > 0 then redis.call('HDEL', nparts, i) end
end
"""


@dataclass
class Batch:
    """One write transaction: fields of `parts`, of `out`, and the indices it tags (`prov`)."""

    parts: dict[str, str] = field(default_factory=dict)
    out: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # the new parts of each in `out`
    tagged: list[str] = field(default_factory=list)
    size: int = 0

    def stale(self, before: dict[str, int]) -> list[str]:
        """The parts of the results written before (`before`: their counts) that this
        batch's results do not overwrite."""
        return [
            f"{index}.{k}"
            for index, count in self.counts.items()
            for k in range(count, before.get(index, 0))
        ]


def batches(
    writes: Sequence[tuple[int, str]], part_bytes: int = PART_BYTES, call_bytes: int = CALL_BYTES
) -> list[Batch]:
    """`writes` (index, result) as write transactions of at most `call_bytes` each (one part
    or whole result at least). A long result's marker goes with its first part, so that
    whatever drops it finds every part written, however few; its tag with its last."""
    out: list[Batch] = [Batch()]

    def put(index: str, name: str, value: str, marker: str | None, last: bool) -> None:
        if out[-1].size and out[-1].size + len(value) > call_bytes:
            out.append(Batch())
        batch = out[-1]
        if marker is None:
            batch.out[index] = value
            batch.counts[index] = 0
        else:
            batch.parts[name] = value
            if marker:
                batch.out[index] = marker
                batch.counts[index] = int(marker[1:])
        if last:
            batch.tagged.append(index)
        batch.size += len(value)

    for index, data in writes:
        key = str(index)
        if len(data) <= part_bytes:
            put(key, key, data, None, True)
            continue
        starts = range(0, len(data), part_bytes)
        marker = f"{MARK}{len(starts)}"
        for k, start in enumerate(starts):
            piece = data[start : start + part_bytes]
            put(key, f"{key}.{k}", piece, marker if k == 0 else "", k == len(starts) - 1)
    return [b for b in out if b.size or b.out]


def part_fields(index: int, value: str | None) -> list[str] | None:
    """The `parts` fields of a stored value that is a marker, else None."""
    if value is None or not value.startswith(MARK):
        return None
    return [f"{index}.{k}" for k in range(int(value[1:]))]


def by_size(sizes: Mapping[str, int], limit: int) -> Iterator[list[str]]:
    """The names of `sizes` (name -> bytes), in order, in lists of at most `limit` bytes
    (one name at least): one read round trip each."""
    names: list[str] = []
    total = 0
    for name, size in sizes.items():
        if names and total + size > limit:
            yield names
            names, total = [], 0
        names.append(name)
        total += size
    if names:
        yield names
