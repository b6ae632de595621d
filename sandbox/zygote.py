"""The zygote: a warm process that forks one confined child per call.

Run as ``python -m sandbox.zygote --handler MODULE``. The handler module
provides ``preload() -> None`` (imports and exercises what calls will use,
before the sandbox root hides the filesystem) and ``handle(payload, report)
-> dict`` (runs in the child, after it is confined). The zygote reads
requests from fd 0 and writes responses to fd 1, one length-prefixed JSON
frame each; anything else that writes to stdout goes to stderr instead.

The child for the next call is forked ahead of time, into the zygote's PID
namespace, and confines itself (private tmp, new session, uid, capabilities)
while no one waits for it. A request gives it its rlimits and its payload;
the zygote waits for the result until the hard deadline, SIGKILLs the child,
has the namespace's reaper kill whatever else the child started, and answers
with an envelope saying how the child ended: ``done`` (with the handler's
result), ``timeout``, ``crashed``, ``no_result`` or ``bad_result``. Only then
does it fork the next child, so no two calls' processes ever share the
namespace.

``python -m sandbox.zygote --probe`` only sets up the isolation, tests it and
prints the report.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import json
import math
import os
import resource
import select
import signal
import sys
import sysconfig
import time
from dataclasses import asdict, dataclass, replace
from types import ModuleType
from typing import Any

from sandbox import isolation
from sandbox.errors import FrameError, FrameTimeout
from sandbox.isolation import IsolationReport, Limits
from sandbox.protocol import encode, read_frame, write_all, write_frame
from sandbox.reaper import PidNamespaceReaper

MAX_REQUEST_BYTES = 64 << 20
MAX_RESULT_BYTES = 4 << 20
_PROBE_FAILED = 64
# What a child may have added to the zygote's address space (the request it
# read, its own bookkeeping) before its limit is set.
_SLACK_BYTES = 16 << 20


def exposed_paths(modules: list[ModuleType]) -> list[str]:
    """What a child may read: the Python installation, shared libraries, our packages."""
    paths = {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    paths |= {p for p in sys.path if p.endswith(("site-packages", "dist-packages"))}
    paths |= {"/lib", "/lib64", "/usr/lib", "/usr/lib64"}
    for module in modules:
        top = sys.modules[module.__name__.split(".")[0]]
        if top.__file__:
            paths.add(os.path.dirname(os.path.abspath(top.__file__)))
    return sorted(paths)


def _address_space_bytes() -> int:
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[0])
    return pages * os.sysconf("SC_PAGE_SIZE")


def _close_fds_except(*keep: int) -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, max(soft, low + 1))


@dataclass(frozen=True)
class Prepared:
    """A forked child waiting for its request, and the two ends of its pipes."""

    pid: int
    request: int
    result: int


class Zygote:
    def __init__(self, handler: ModuleType | None, *, isolate: bool) -> None:
        self.handler = handler
        self.devnull = os.open("/dev/null", os.O_RDWR)
        modules = [sys.modules[__name__]] + ([handler] if handler else [])
        self.baseline = _address_space_bytes()
        mode, reason = isolation.enter_namespaces(exposed_paths(modules), enabled=isolate)
        self._dying: list[int] = []
        self._ready: Prepared | None = None
        self.reaper: PidNamespaceReaper | None = None
        if mode != "none":
            try:
                self.reaper = PidNamespaceReaper()
            except OSError as exc:
                reason = reason or f"cannot create a PID namespace: {exc}"
        self.report = self._self_test(mode, reason)

    def _self_test(self, mode: isolation.Mode, reason: str | None) -> IsolationReport:
        filesystem = mode != "none" and reason is None
        network = mode != "none" and isolation.network_is_isolated()
        limits = Limits(cpu_s=5, address_space_bytes=self.baseline + (256 << 20))
        pid = os.fork()
        if pid == 0:
            code = _PROBE_FAILED
            try:
                for fd in (0, 1, 2):
                    os.dup2(self.devnull, fd)
                isolation.enter_child(mode, filesystem, limits)
                code = isolation.probe_child(filesystem)
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        bits = os.waitstatus_to_exitcode(status)
        if bits < 0 or bits & _PROBE_FAILED:
            return IsolationReport(
                mode="none", reason=reason or "the probe child could not be confined"
            )
        report = IsolationReport(
            mode=mode,
            network=network,
            filesystem=filesystem and bool(bits & 2),
            pid_namespace=self.reaper is not None and bool(bits & 1) and self._clear(),
            unprivileged=bool(bits & 4),
            reason=reason,
        )
        if not report.holds and report.reason is None:
            missing = [
                name
                for name in ("network", "filesystem", "pid_namespace", "unprivileged")
                if not getattr(report, name)
            ]
            report = replace(report, reason=f"not isolated: {', '.join(missing)}")
        return report

    def _clear(self) -> bool:
        return self.reaper is None or self.reaper.clear()

    def serve(self, proto_in: int, proto_out: int) -> None:
        hello = {
            "report": self.report.to_dict(),
            "pid": os.getpid(),
            "baseline_bytes": self.baseline,
        }
        write_frame(proto_out, hello)
        while True:
            if self._ready is None:
                self._ready = self._prepare()
            while self._dying and not select.select([proto_in], [], [], 0.05)[0]:
                self._reap_dying()
            try:
                request = read_frame(proto_in, max_bytes=MAX_REQUEST_BYTES)
            except FrameError:
                return  # the service closed the pipe: time to go
            envelope, leftover = self.call(request)
            write_frame(proto_out, envelope)
            # Cleaning up after the answer overlaps the child's teardown with
            # the service's work; the next request is read only afterwards.
            self._finish(leftover)

    def _prepare(self) -> Prepared:
        """Fork the next call's child: confined, waiting for its request."""
        if self.reaper is not None and not self.reaper.alive():
            raise SystemExit("the PID namespace's reaper died; this zygote cannot confine calls")
        request_r, request_w = os.pipe()
        result_r, result_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(request_w)
            os.close(result_r)
            self._child(request_r, result_w)
        os.close(request_r)
        os.close(result_w)
        return Prepared(pid, request_w, result_r)

    def call(self, request: dict[str, Any]) -> tuple[dict[str, Any], int | None]:
        """Run one request; returns the envelope and the child still to be reaped."""
        hard_timeout = float(request["hard_timeout_s"])
        limits = Limits(
            cpu_s=int(request["cpu_s"]),
            address_space_bytes=self.baseline + _SLACK_BYTES + int(request["memory_bytes"]),
            processes=int(request.get("processes", 1)),
        )
        started = time.monotonic()
        deadline = started + hard_timeout
        message = {"payload": request.get("payload", {}), "limits": asdict(limits)}
        child = self._hand_over(message, deadline)
        envelope: dict[str, Any]
        try:
            envelope = _from_frame(
                read_frame(child.result, max_bytes=MAX_RESULT_BYTES, deadline=deadline)
            )
        except FrameTimeout:
            envelope = {"status": "timeout", "message": f"killed after {hard_timeout:g} s"}
        except FrameError as exc:
            envelope = {"status": "no_result", "message": str(exc)}
        finally:
            os.close(child.request)
            os.close(child.result)
        if envelope["status"] != "no_result":
            _kill(child.pid)
            envelope["wall_s"] = time.monotonic() - started
            return envelope, child.pid
        # The pipe closed without a result: how the child ended explains why.
        status, rusage = self._wait_exit(child.pid, deadline)
        envelope = _explain_death(status, rusage, limits)
        envelope["wall_s"] = time.monotonic() - started
        envelope["cpu_s"] = rusage.ru_utime + rusage.ru_stime
        return envelope, None

    def _hand_over(self, message: dict[str, Any], deadline: float) -> Prepared:
        """Give the request to the waiting child; to a fresh one if that one died meanwhile."""
        child, self._ready = self._ready or self._prepare(), None
        try:
            write_frame(child.request, message, deadline)
        except FrameError:
            # Killed from outside while it waited: this call never reached it.
            os.close(child.request)
            os.close(child.result)
            self._finish(child.pid)
            child = self._prepare()
            with contextlib.suppress(FrameError):  # reading its result will tell
                write_frame(child.request, message, deadline)
        return child

    def _wait_exit(self, pid: int, deadline: float) -> tuple[int, Any]:
        # A child that closed its pipe but lingers gets until the deadline.
        while time.monotonic() < deadline:
            done, status, rusage = os.wait4(pid, os.WNOHANG)
            if done:
                _kill(pid)
                return status, rusage
            time.sleep(0.002)
        _kill(pid)
        _, status, rusage = os.wait4(pid, 0)
        return status, rusage

    def _finish(self, pid: int | None) -> None:
        """Kill the child and everything else it started."""
        if pid is not None:
            _kill(pid)
            self._dying.append(pid)
        if not self._clear():
            raise SystemExit("the PID namespace's reaper stopped answering")
        # A killed child can no longer fork, so it need not be waited for here:
        # its teardown overlaps the next call, and it is reaped later.
        self._reap_dying()

    def _reap_dying(self) -> None:
        self._dying = [p for p in self._dying if os.waitpid(p, os.WNOHANG)[0] == 0]

    def _child(self, request_r: int, result_w: int) -> None:
        frame = b""
        try:
            for fd in (0, 1, 2):
                os.dup2(self.devnull, fd)
            _close_fds_except(request_r, result_w)
            assert self.handler is not None
            isolation.confine(self.report.mode, self.report.filesystem)
            message = read_frame(request_r, max_bytes=MAX_REQUEST_BYTES)
            limits = Limits(**message["limits"])
            used = resource.getrusage(resource.RUSAGE_SELF)
            spent = math.ceil(used.ru_utime + used.ru_stime)  # before the request came
            isolation.set_limits(replace(limits, cpu_s=limits.cpu_s + spent))
            frame = encode({"result": self.handler.handle(message["payload"], self.report)})
        except FrameError:
            os._exit(0)  # the zygote is gone, or gave up on us
        except BaseException as exc:  # the zygote must hear about anything
            frame = encode({"error": f"{type(exc).__name__}: {exc}"})
        try:
            write_all(result_w, frame)
        finally:
            os._exit(0)


def _kill(pid: int) -> None:
    # The child leads its own session; without a PID namespace the group kill
    # is what reaches anything it started.
    for kill in (os.kill, os.killpg):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)


def _from_frame(frame: dict[str, Any]) -> dict[str, Any]:
    if isinstance(frame.get("result"), dict):
        return {"status": "done", "result": frame["result"]}
    return {"status": "bad_result", "message": str(frame.get("error", "malformed result"))[:2000]}


def _explain_death(status: int, rusage: Any, limits: Limits) -> dict[str, Any]:
    cpu = rusage.ru_utime + rusage.ru_stime if rusage else 0.0
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        if signum in (signal.SIGXCPU, signal.SIGKILL) and cpu >= limits.cpu_s - 0.05:
            return {"status": "timeout", "message": f"CPU limit of {limits.cpu_s} s reached"}
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = str(signum)
        return {"status": "crashed", "signal": name, "message": f"the child died of {name}"}
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
    return {"status": "no_result", "message": f"the child exited with status {code} and no result"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox.zygote")
    parser.add_argument("--handler", help="module with preload() and handle(payload, report)")
    parser.add_argument("--no-isolation", action="store_true", help="skip the OS layer")
    parser.add_argument("--probe", action="store_true", help="print the isolation report and exit")
    args = parser.parse_args(argv)

    # Not PR_SET_PDEATHSIG: it fires when the *thread* that spawned us exits.
    # The zygote leaves when its request pipe reaches EOF instead.
    proto_out = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    handler = None
    if args.handler and not args.probe:
        handler = importlib.import_module(args.handler)
        handler.preload()
    zygote = Zygote(handler, isolate=not args.no_isolation)
    if args.probe:
        write_all(proto_out, json.dumps(zygote.report.to_dict()).encode() + b"\n")
        return 0
    gc.collect()
    gc.freeze()  # children then share the preloaded heap instead of touching it
    zygote.serve(0, proto_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
