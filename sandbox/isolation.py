"""The OS boundary: namespaces, a read-only root, rlimits and a non-root uid.

RestrictedPython is only a filter; this module is the wall. A zygote calls
`enter_namespaces` once: it leaves the host's network (a new, empty network
namespace), builds a new root holding only the Python installation, the
shared libraries and a few device nodes, all bind-mounted read-only, and
chroots into it. Its children are born in a PID namespace of their own (see
`sandbox.reaper`). Each child calls `confine` (a private tmpfs on /tmp, a new
session, a non-root uid with no capabilities and ``no_new_privs``) and then
`set_limits` (CPU, address space, file size, open files, processes, no core)
before it runs untrusted code.

As root the zygote uses the namespaces directly and each child becomes a uid of its own;
as another user it first enters a user namespace, where children keep that
user's (non-root) uid and lose every capability. Where none of this is allowed
(e.g. a container without CAP_SYS_ADMIN or user namespaces) the report says
why, and the child still gets rlimits, a new session and, as root, uid 65534.

The syscalls go through ctypes because ``os.unshare`` and ``os.mount`` do not
exist on Python 3.11.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import resource
import signal
import socket
import struct
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4

SCRATCH_FALLBACK = "/scratch"

SANDBOX_UID = 65534  # the one uid a user namespace maps (non-root service)
SANDBOX_GID = 65534
# As root, every call runs as a uid of its own drawn from this range (no passwd entry,
# no files on the host): RLIMIT_NPROC then counts only that call's processes, not
# every sandbox on the machine, and one call's processes cannot signal another's.
CALL_UID_BASE = 1 << 30
CALL_UID_SPAN = 1 << 24


def is_sandbox_uid(uid: int) -> bool:
    return uid == SANDBOX_UID or CALL_UID_BASE <= uid < CALL_UID_BASE + CALL_UID_SPAN


def call_uid() -> int:
    return CALL_UID_BASE + int.from_bytes(os.urandom(3), "little") % CALL_UID_SPAN


_CAPSET_SYSCALL = {"x86_64": 126, "aarch64": 91}
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_LAST_CAP = 63

# Flags a bind mount inherits from its source and that a user namespace may
# not clear on remount.
_STATVFS_TO_MS = {
    os.ST_NOSUID: MS_NOSUID,
    os.ST_NODEV: MS_NODEV,
    os.ST_NOEXEC: MS_NOEXEC,
    os.ST_NOATIME: MS_NOATIME,
    os.ST_NODIRATIME: MS_NODIRATIME,
    os.ST_RELATIME: MS_RELATIME,
}

_DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")
_ROOT_CANDIDATES = ("/mnt", "/media", "/srv", "/opt", "/boot", "/home", "/var")

Mode = Literal["root", "userns", "none"]

_libc = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class IsolationReport:
    """What the OS layer achieved, as observed by a probe child, not assumed."""

    mode: Mode
    network: bool = False
    filesystem: bool = False
    pid_namespace: bool = False
    unprivileged: bool = False
    reason: str | None = None

    @property
    def holds(self) -> bool:
        return self.network and self.filesystem and self.pid_namespace and self.unprivileged

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "isolated": self.holds}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IsolationReport:
        mode = data.get("mode")
        return cls(
            mode=mode if mode in ("root", "userns") else "none",
            network=bool(data.get("network")),
            filesystem=bool(data.get("filesystem")),
            pid_namespace=bool(data.get("pid_namespace")),
            unprivileged=bool(data.get("unprivileged")),
            reason=data.get("reason"),
        )


@dataclass(frozen=True)
class Limits:
    """Per-call resource limits, set in the child before untrusted code runs."""

    cpu_s: int
    address_space_bytes: int
    file_size_bytes: int = 16 << 20
    open_files: int = 64
    # RLIMIT_NPROC counts every process of the uid, so 1 forbids forking at all
    # (the zygote forks the child as root, which the limit does not bind).
    processes: int = 1
    tmp_bytes: int = 16 << 20


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None
) -> None:
    def enc(value: str | None) -> bytes | None:
        return None if value is None else os.fsencode(value)

    result = _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data))
    _check(result, f"mount {source or ''} on {target}")


def prctl(option: int, arg: int = 0) -> None:
    zero = ctypes.c_ulong(0)
    _check(_libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), zero, zero, zero), "prctl")


def _write_file(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def _enter_user_namespace() -> None:
    uid, gid = os.getuid(), os.getgid()
    unshare(CLONE_NEWUSER)
    _write_file("/proc/self/setgroups", "deny")
    _write_file("/proc/self/uid_map", f"{SANDBOX_UID} {uid} 1\n")
    _write_file("/proc/self/gid_map", f"{SANDBOX_GID} {gid} 1\n")


def _inherited_flags(path: str) -> int:
    flags = 0
    f_flag = os.statvfs(path).f_flag
    for st_bit, ms_bit in _STATVFS_TO_MS.items():
        if f_flag & st_bit:
            flags |= ms_bit
    return flags


def _bind_read_only(source: str, target: str, *, device: bool = False) -> None:
    mount(source, target, None, MS_BIND | MS_REC, None)
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | _inherited_flags(target)
    if not device:
        flags |= MS_NODEV
    mount(None, target, None, flags, None)


def _expose(root: str, path: str) -> None:
    """Make `path` visible read-only under `root`, at the same absolute path."""
    path = os.path.abspath(path)
    if not os.path.lexists(path):
        return
    if os.path.islink(path):
        link = root + path
        os.makedirs(os.path.dirname(link), mode=0o755, exist_ok=True)
        if not os.path.lexists(link):
            os.symlink(os.readlink(path), link)
        path = os.path.realpath(path)
        if not os.path.exists(path):
            return
    target = root + path
    if os.path.ismount(target) or (os.path.isdir(target) and os.listdir(target)):
        return  # already exposed through a parent or an earlier entry
    if os.path.isdir(path):
        os.makedirs(target, mode=0o755, exist_ok=True)
        _bind_read_only(path, target)
    else:
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        with open(target, "a"):
            pass
        _bind_read_only(path, target, device=path in _DEVICES)


def _choose_root(exposed: Iterable[str]) -> str:
    reals = [os.path.realpath(p) for p in exposed] + ["/dev"]
    for candidate in _ROOT_CANDIDATES:
        if not os.path.isdir(candidate) or os.path.islink(candidate):
            continue
        if any(r == candidate or r.startswith(candidate + "/") for r in reals):
            continue
        return candidate
    raise OSError(errno.ENOENT, "no directory to mount the sandbox root on")


def _build_root(exposed: list[str]) -> None:
    mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    root = _choose_root(exposed)
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=0755")
    # Parents first: a path inside one already exposed is then skipped, and no
    # later bind can hide an earlier one.
    for path in sorted(dict.fromkeys(exposed), key=len):
        _expose(root, path)
    for device in _DEVICES:
        # /dev/null is opened before the chroot; the others are a convenience.
        with contextlib.suppress(OSError):
            _expose(root, device)
    for scratch in ("/tmp", SCRATCH_FALLBACK):
        os.makedirs(root + scratch, exist_ok=True)
        os.chmod(root + scratch, 0o1777)
    mount(None, root, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None)
    os.chdir(root)
    os.chroot(".")
    os.chdir("/")


def enter_namespaces(exposed: list[str], *, enabled: bool) -> tuple[Mode, str | None]:
    """Leave the host's network and filesystem; returns the mode and why not, if not."""
    if not enabled:
        return "none", "OS isolation is disabled by configuration"
    flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
    mode: Mode = "root" if os.geteuid() == 0 else "userns"
    try:
        if mode == "userns":
            if platform.machine() not in _CAPSET_SYSCALL:
                return "none", f"dropping capabilities is not implemented on {platform.machine()}"
            _enter_user_namespace()
        unshare(flags)
    except OSError as exc:
        return "none", f"cannot create namespaces ({mode} mode): {exc}"
    try:
        _build_root(exposed)
    except OSError as exc:
        return mode, f"cannot build the read-only root: {exc}"
    return mode, None


def new_pid_namespace() -> None:
    """Put this process's future children in a new PID namespace (once per process)."""
    unshare(CLONE_NEWPID)


def network_is_isolated() -> bool:
    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        return False
    return names == ["lo"]


def _drop_bounding_set() -> None:
    for cap in range(_LAST_CAP + 1):
        try:
            prctl(PR_CAPBSET_DROP, cap)
        except OSError:
            break  # past the kernel's last capability, or not allowed to drop
    with contextlib.suppress(OSError):
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)


def _clear_capabilities() -> None:
    """Empty the effective, permitted and inheritable sets (a no-op after a uid change)."""
    number = _CAPSET_SYSCALL.get(platform.machine())
    if number is None:
        return
    header = ctypes.create_string_buffer(struct.pack("=Ii", _LINUX_CAPABILITY_VERSION_3, 0))
    data = ctypes.create_string_buffer(bytes(24))
    _check(_libc.syscall(ctypes.c_long(number), header, data), "capset")


def set_limits(limits: Limits) -> None:
    """Lower this process's rlimits (allowed without privileges)."""
    cpu = max(1, limits.cpu_s)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (limits.address_space_bytes,) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_bytes,) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files,) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes,) * 2)


def confine(mode: Mode, filesystem: bool, tmp_bytes: int = 16 << 20) -> None:
    """Confine the calling (freshly forked) process; `set_limits` follows before untrusted code."""
    if filesystem:
        unshare(CLONE_NEWNS)
        # A private tmpfs on /tmp would hide the Python installation when it lives
        # under /tmp (a checkout or virtualenv there): then the scratch space moves.
        scratch = SCRATCH_FALLBACK if os.listdir("/tmp") else "/tmp"
        options = f"size={tmp_bytes},nr_inodes=1024,mode=1777"
        mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV, options)
        os.environ["TMPDIR"] = scratch
        tempfile.tempdir = scratch
        os.chdir(scratch)
    else:
        os.chdir("/")
    os.setsid()
    privileged = mode != "none" or os.geteuid() == 0
    if privileged:
        _drop_bounding_set()
    if os.geteuid() == 0:
        uid = call_uid() if mode == "root" else SANDBOX_UID
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    if privileged:
        _clear_capabilities()
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    prctl(PR_SET_DUMPABLE, 0)
    # Set after the uid change, which clears it.
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def enter_child(mode: Mode, filesystem: bool, limits: Limits) -> None:
    """`confine`, then `set_limits`."""
    confine(mode, filesystem, limits.tmp_bytes)
    set_limits(limits)


def probe_child(filesystem: bool) -> int:
    """In a confined child: a bit mask of what holds (1 pid ns, 2 read-only root, 4 non-root)."""
    bits = 0
    if os.getppid() == 0:  # the parent lives outside this PID namespace
        bits |= 1
    scratch = os.path.join(tempfile.gettempdir(), "sandbox-probe")
    if filesystem and not _can_create("/sandbox-probe") and _can_create(scratch):
        bits |= 2
    if os.geteuid() != 0 and os.getuid() != 0:
        bits |= 4
    return bits


def _can_create(path: str) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
    except OSError:
        return False
    os.close(fd)
    return True
