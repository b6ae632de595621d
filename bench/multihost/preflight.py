"""What a multi-host run needs on this machine, and its time bound."""

from __future__ import annotations

import shutil
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from bench.multihost.netns import unavailable
from bench.multihost.procs import JUDGE


def missing() -> str | None:
    """Why the scenario cannot run here, or None."""
    for binary, package in (("haproxy", "haproxy"), ("redis-server", "redis-server"),
                            ("setpriv", "util-linux")):  # fmt: skip
        if shutil.which(binary) is None:
            return f"`{binary}` is missing (apt-get install {package})"
    if not JUDGE.exists():
        return f"{JUDGE} is missing (the checkout's venv: see README.md)"
    return unavailable()


class RunTimeout(Exception):
    pass


@contextmanager
def bounded(seconds: float) -> Iterator[None]:
    """Raise RunTimeout in the main thread after `seconds`, and on SIGTERM: an exception,
    so the context managers on the way out still kill the processes and remove the
    namespaces (a bare SIGTERM or SIGALRM would end the process without them)."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("bounded() needs the main thread (signal handlers)")

    def stop(signum: int, frame: FrameType | None) -> None:
        raise RunTimeout(f"stopped by {signal.Signals(signum).name} (limit {seconds:.0f} s)")

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGALRM, signal.SIGTERM)}
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
