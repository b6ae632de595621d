"""Length-prefixed JSON frames over pipes, with deadlines.

The service talks to a zygote, and a zygote's child answers the zygote, over
plain pipes. Every read and write takes an absolute deadline
(``time.monotonic()``) so that a wedged peer costs a bounded wait, never a hung
thread, and every read takes a size cap so that a hostile child cannot make
its reader allocate without bound.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

from sandbox.errors import FrameError, FrameTimeout

_HEADER = struct.Struct(">I")


def _wait(fd: int, deadline: float | None, *, write: bool) -> None:
    remaining = None if deadline is None else deadline - time.monotonic()
    if remaining is not None and remaining <= 0:
        raise FrameTimeout("deadline passed")
    ready = (
        select.select([], [fd], [], remaining) if write else select.select([fd], [], [], remaining)
    )
    if not any(ready):
        raise FrameTimeout("deadline passed")


def write_all(fd: int, data: bytes, deadline: float | None = None) -> None:
    view = memoryview(data)
    while view:
        _wait(fd, deadline, write=True)
        try:
            sent = os.write(fd, view)
        except BlockingIOError:
            continue
        except (BrokenPipeError, OSError) as exc:
            raise FrameError(f"write failed: {exc}") from exc
        view = view[sent:]


def read_exact(fd: int, size: int, deadline: float | None = None) -> bytes:
    chunks: list[bytes] = []
    missing = size
    while missing:
        _wait(fd, deadline, write=False)
        try:
            chunk = os.read(fd, min(missing, 1 << 20))
        except BlockingIOError:
            continue
        except OSError as exc:
            raise FrameError(f"read failed: {exc}") from exc
        if not chunk:
            raise FrameError("the peer closed the pipe")
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)


def encode(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode("utf-8")
    return _HEADER.pack(len(body)) + body


def write_frame(fd: int, message: dict[str, Any], deadline: float | None = None) -> None:
    write_all(fd, encode(message), deadline)


def read_frame(fd: int, *, max_bytes: int, deadline: float | None = None) -> dict[str, Any]:
    (size,) = _HEADER.unpack(read_exact(fd, _HEADER.size, deadline))
    if size > max_bytes:
        raise FrameError(f"frame of {size} bytes exceeds the {max_bytes}-byte limit")
    body = read_exact(fd, size, deadline)
    try:
        message = json.loads(body)
    except ValueError as exc:
        raise FrameError(f"frame is not JSON: {exc}") from exc
    if not isinstance(message, dict):
        raise FrameError("frame is not a JSON object")
    return message
