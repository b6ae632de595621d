"""A PID namespace for a zygote's children, and its init, which clears it after each call.

Linux lets a process ``unshare(CLONE_NEWPID)`` only once, so a zygote cannot
make a fresh PID namespace per call. It makes one, and forks its init first:
the reaper. Every call's child is then forked into that namespace, where
whatever it spawns (``os.fork`` through a sympy escape, a detached
``setsid`` daemon) stays visible to the reaper. After each call the zygote
asks the reaper to ``kill(-1, SIGKILL)``, which in a PID namespace reaches
every process in it but the reaper itself, and to reap them. Nothing a call
started outlives it, and no call's processes meet the next call's.

The reaper is protected the way an init is: the kernel drops signals sent to
it from inside its namespace unless it handles them, so it resets every
handler it inherited from Python to the default.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time

from sandbox import isolation

_KILL = b"K"
_DONE = b"k"


class PidNamespaceReaper:
    def __init__(self) -> None:
        isolation.new_pid_namespace()
        command_r, command_w = os.pipe()
        done_r, done_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(command_w)
                os.close(done_r)
                _reaper_main(command_r, done_w)
            finally:
                os._exit(0)
        os.close(command_r)
        os.close(done_w)
        self.pid = pid
        self._command = command_w
        self._done = done_r

    def alive(self) -> bool:
        try:
            done, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return False
        return done == 0

    def clear(self, timeout_s: float = 5.0) -> bool:
        """Kill every process in the namespace but the reaper; False if it did not confirm."""
        try:
            os.write(self._command, _KILL)
        except OSError:
            return False
        ready, _, _ = select.select([self._done], [], [], timeout_s)
        return bool(ready) and os.read(self._done, 1) == _DONE


def _reaper_main(command: int, done: int) -> None:
    for signum in signal.valid_signals():
        if signum in (signal.SIGKILL, signal.SIGSTOP):
            continue
        with contextlib.suppress(OSError, ValueError):
            signal.signal(signum, signal.SIG_DFL)
    for fd in range(3):
        with contextlib.suppress(OSError):
            os.close(fd)
    low, high = sorted((command, done))
    os.closerange(3, low)
    os.closerange(low + 1, high)
    os.closerange(high + 1, 1 << 16)
    isolation.prctl(isolation.PR_SET_DUMPABLE, 0)
    isolation.prctl(isolation.PR_SET_PDEATHSIG, signal.SIGKILL)
    while True:
        ready, _, _ = select.select([command], [], [], 1.0)
        _reap(block=False)
        if not ready:
            continue
        if os.read(command, 1) != _KILL:
            return  # the zygote is gone
        with contextlib.suppress(ProcessLookupError):  # nobody else is here
            os.kill(-1, signal.SIGKILL)
        _reap(block=True)
        os.write(done, _DONE)


def _reap(*, block: bool) -> None:
    deadline = time.monotonic() + 2.0
    while True:
        try:
            pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0 or time.monotonic() > deadline:
            return
