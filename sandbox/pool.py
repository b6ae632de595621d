"""Service side of the zygotes: start them, hand out one per call, replace the dead.

A `ZygotePool` owns `size` zygote processes running one handler module. A
call takes an idle zygote (waiting if all are busy), sends one request, and
reads the response until the request's hard deadline plus a grace period. A
zygote that misbehaves (no answer in time, a broken pipe, garbage) is killed
and replaced, so one hostile call costs at most one zygote for a bounded
time and never blocks calls on the others. Zygotes never run untrusted code
themselves (their children do), so a failing zygote is an outside event: the
call is tried once more on another.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Self

from sandbox.errors import FrameError, ZygoteError
from sandbox.isolation import IsolationReport
from sandbox.protocol import read_frame, write_frame

logger = logging.getLogger(__name__)

_RESPONSE_GRACE_S = 5.0
_MAX_RESPONSE_BYTES = 8 << 20


@dataclass(frozen=True)
class Envelope:
    """How one call ended, as the zygote saw it."""

    status: str  # done | timeout | crashed | no_result | bad_result | internal
    result: dict[str, Any] | None = None
    message: str = ""
    signal: str | None = None
    wall_s: float | None = None
    cpu_s: float | None = None

    @classmethod
    def from_message(cls, message: dict[str, Any]) -> Envelope:
        result = message.get("result")
        return cls(
            status=str(message.get("status", "internal")),
            result=result if isinstance(result, dict) else None,
            message=str(message.get("message", "")),
            signal=message.get("signal"),
            wall_s=message.get("wall_s"),
            cpu_s=message.get("cpu_s"),
        )


def zygote_env() -> dict[str, str]:
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.pathsep.join([package_parent, *paths]),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",  # set and dict orders in printed output are reproducible
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
    }
    return env


class Zygote:
    """One zygote process and its two pipes."""

    def __init__(self, handler: str, *, isolate: bool, startup_timeout_s: float) -> None:
        command = [sys.executable, "-s", "-m", "sandbox.zygote", "--handler", handler]
        if not isolate:
            command.append("--no-isolation")
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=zygote_env(),
            start_new_session=True,  # a Ctrl-C meant for the service is not theirs
            cwd="/",
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._in = self.process.stdin.fileno()
        self._out = self.process.stdout.fileno()
        os.set_blocking(self._in, False)
        try:
            hello = read_frame(
                self._out,
                max_bytes=_MAX_RESPONSE_BYTES,
                deadline=time.monotonic() + startup_timeout_s,
            )
        except FrameError as exc:
            self.kill()
            raise ZygoteError(f"the zygote for {handler} did not start: {exc}") from exc
        self.report = IsolationReport.from_dict(hello.get("report", {}))
        self.pid = self.process.pid

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def call(self, request: dict[str, Any], hard_timeout_s: float) -> Envelope:
        deadline = time.monotonic() + hard_timeout_s + _RESPONSE_GRACE_S
        write_frame(self._in, {**request, "hard_timeout_s": hard_timeout_s}, deadline)
        return Envelope.from_message(
            read_frame(self._out, max_bytes=_MAX_RESPONSE_BYTES, deadline=deadline)
        )

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()

    def close(self) -> None:
        """Ask politely (EOF on its request pipe), then kill."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=2)
        self.kill()


class ZygotePool:
    """`size` zygotes running `handler`; thread-safe."""

    def __init__(
        self,
        handler: str,
        *,
        size: int,
        isolate: bool = True,
        startup_timeout_s: float = 120.0,
    ) -> None:
        if size < 1:
            raise ValueError("a pool needs at least one zygote")
        self.handler = handler
        self.size = size
        self.isolate = isolate
        self.startup_timeout_s = startup_timeout_s
        self._idle: queue.Queue[Zygote | None] = queue.Queue()
        self._lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._started = False
        self._closed = False
        self._all: set[Zygote] = set()
        self.report: IsolationReport | None = None
        self.replaced = 0

    def start(self) -> IsolationReport:
        """Start every zygote (in parallel); returns the isolation they achieved."""
        with self._lock:
            if self._started:
                assert self.report is not None
                return self.report
            results: list[Zygote | BaseException] = []

            def spawn() -> None:
                try:
                    results.append(self._spawn())
                except BaseException as exc:
                    results.append(exc)

            threads = [threading.Thread(target=spawn) for _ in range(self.size)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            failures = [r for r in results if isinstance(r, BaseException)]
            if failures:
                for r in results:
                    if isinstance(r, Zygote):
                        r.kill()
                raise ZygoteError(str(failures[0])) from failures[0]
            for zygote in results:
                assert isinstance(zygote, Zygote)
                self._idle.put(zygote)
            self._started = True
            assert self.report is not None
            return self.report

    def _spawn(self) -> Zygote:
        zygote = Zygote(
            self.handler, isolate=self.isolate, startup_timeout_s=self.startup_timeout_s
        )
        with self._state_lock:
            self.report = zygote.report
            self._all.add(zygote)
        return zygote

    def call(self, request: dict[str, Any], hard_timeout_s: float) -> Envelope:
        """Run one request on an idle zygote; never raises for what the call did.

        A zygote that fails (it died, or stopped answering) is replaced and the
        request is tried once more on another: each run is a fresh child, so
        running it again is harmless, and a zygote killed from outside should
        not cost the caller its answer.
        """
        if not self._started:
            self.start()
        for attempt in (1, 2):
            zygote = self._acquire()
            if isinstance(zygote, Envelope):
                return zygote
            try:
                envelope = zygote.call(request, hard_timeout_s)
            except FrameError as exc:
                logger.warning("zygote %s (%s) failed: %s", zygote.pid, self.handler, exc)
                self._discard(zygote)
                if attempt == 1:
                    self._idle.put(None)  # the retry starts a fresh zygote if none is idle
                    continue
                self._replace_in_background()
                return Envelope("internal", message=f"the sandbox worker failed twice: {exc}")
            self._idle.put(zygote)
            return envelope
        raise AssertionError("unreachable")

    def _acquire(self) -> Zygote | Envelope:
        zygote = self._idle.get()
        if self._closed:
            self._idle.put(None)  # wake the next waiter too
            if zygote is not None:
                zygote.close()
            return Envelope("internal", message="the sandbox pool is closed")
        if zygote is not None and zygote.alive:
            return zygote
        if zygote is not None:
            self._discard(zygote)
        try:
            return self._spawn()
        except ZygoteError as exc:
            self._idle.put(None)
            return Envelope("internal", message=str(exc))

    def _discard(self, zygote: Zygote) -> None:
        zygote.kill()
        with self._state_lock:
            self._all.discard(zygote)
            self.replaced += 1

    def _replace_in_background(self) -> None:
        if self._closed:
            return

        def replace() -> None:
            try:
                self._idle.put(self._spawn())
            except ZygoteError as exc:
                logger.error("cannot replace a sandbox zygote: %s", exc)
                self._idle.put(None)  # the next caller tries again

        threading.Thread(target=replace, name="zygote-replace", daemon=True).start()

    def pids(self) -> list[int]:
        return sorted(z.pid for z in self._all if z.alive)

    def close(self) -> None:
        self._closed = True
        with self._state_lock:
            zygotes = list(self._all)
            self._all.clear()
        for zygote in zygotes:
            zygote.close()
        self._idle.put(None)


class PoolOwner:
    """Owns a zygote pool and the threads that wait on it (a `Sandbox`, an equivalence
    checker): `close`, leaving a ``with`` block or being collected shuts down both."""

    def __init__(self, pool: ZygotePool, threads: int, thread_name_prefix: str) -> None:
        self.pool = pool
        self._executor = ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix=thread_name_prefix
        )
        weakref.finalize(self, _shutdown, self.pool, self._executor)

    def close(self) -> None:
        _shutdown(self.pool, self._executor)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _shutdown(pool: ZygotePool, executor: ThreadPoolExecutor) -> None:
    pool.close()
    executor.shutdown(wait=False, cancel_futures=True)
