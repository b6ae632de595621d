"""The results file of ``judge-service judge``: what it holds, and writing it without ever
leaving half a line.

A run either appends to OUT (each result one whole line, flushed as it is written; a
partial last line that a crash left is cut off first), or, with ``--retry``, writes a
new OUT beside the old one (a temporary file in the same directory, fsynced) and
renames it over OUT: a crash leaves the old OUT as it was, never a mix.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO


@dataclass(frozen=True)
class Line:
    """One complete result line of OUT: where it is, and what it says."""

    offset: int
    length: int  # with its newline
    id: str
    status: str


@dataclass
class Existing:
    """OUT as a previous run left it: its result lines by id, in file order."""

    lines: list[Line] = field(default_factory=list)
    complete_bytes: int = 0  # up to the end of the last complete line
    size: int = 0

    def by_id(self) -> dict[str, deque[Line]]:
        out: dict[str, deque[Line]] = {}
        for line in self.lines:
            out.setdefault(line.id, deque()).append(line)
        return out


def scan(path: Path) -> Existing:
    """The result lines of `path` (none if it does not exist). A last line without its
    newline was cut short by a crash and is not counted; a complete line that is not a
    result (not JSON, no id) is skipped, and its rollout judged again."""
    existing = Existing()
    if not path.exists():
        return existing
    offset = 0
    with path.open("rb") as handle:
        for raw in handle:
            if not raw.endswith(b"\n"):
                break
            existing.complete_bytes = offset + len(raw)
            record = _record(raw)
            if record is not None:
                existing.lines.append(Line(offset, len(raw), *record))
            offset += len(raw)
        existing.size = handle.seek(0, os.SEEK_END)
    return existing


def _record(raw: bytes) -> tuple[str, str] | None:
    try:
        record = json.loads(raw)
    except ValueError:  # JSONDecodeError, or bytes that are not UTF-8
        return None
    if not isinstance(record, dict) or not isinstance(record.get("id"), str):
        return None
    status = record.get("status")
    return record["id"], status if isinstance(status, str) else ""


class Writer:
    """Whole lines into OUT (appended) or into its replacement (`rewriting`)."""

    def __init__(self, handle: BinaryIO, source: Path | None) -> None:
        self._handle = handle
        self._source = source.open("rb") if source is not None else None

    def write(self, text: str) -> None:
        # One buffered write and a flush: the line reaches the file in one piece (a
        # crash can cut it only inside the kernel's write, which `scan` then ignores).
        self._handle.write(text.encode("utf-8") + b"\n")
        self._handle.flush()

    def copy(self, line: Line) -> None:
        """A line of the old OUT, byte for byte."""
        if self._source is None:
            raise RuntimeError("no file to copy from")
        self._source.seek(line.offset)
        self._handle.write(self._source.read(line.length))

    def close(self) -> None:
        if self._source is not None:
            self._source.close()


@contextmanager
def appending(path: Path, existing: Existing) -> Iterator[Writer]:
    """Append to `path`, first cutting off a partial last line a crash left there."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if existing.size > existing.complete_bytes:
        os.truncate(path, existing.complete_bytes)
    with path.open("ab") as handle:
        writer = Writer(handle, None)
        try:
            yield writer
        finally:
            writer.close()


@contextmanager
def rewriting(path: Path, existing: Existing) -> Iterator[Writer]:
    """A new `path`, written beside it and renamed over it only once complete (its
    lines copied from the old `path` as `existing` found them)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            writer = Writer(handle, path if existing.lines else None)
            try:
                yield writer
            finally:
                writer.close()
            handle.flush()
            os.fsync(handle.fileno())
        mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else _default_mode()
        os.chmod(temp, mode)  # mkstemp makes it 0600; keep what OUT had
        os.replace(temp, path)
        _fsync_dir(path.parent)  # the rename itself survives a power cut
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def _default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
