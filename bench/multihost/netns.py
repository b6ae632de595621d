"""Hosts as network namespaces on one machine: a bridge in the root namespace, one veth
per host, its far end named eth0 inside the host's namespace.

Every name carries the prefix `PREFIX` and a run tag. Only one run owns the names at a
time (`exclusive`, a file lock): a run killed before its cleanup leaves namespaces,
links and processes behind, and the next run, holding the lock, knows that anything with
the prefix is such a leftover and removes it before it builds its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "jmh"  # namespaces jmh-<tag>-<n>, bridge jmhb<tag>, veths jmhv<tag><n> (≤ 15 chars)
LOCK = Path("/run/lock/judge-multihost.lock")
DEFAULT_SUBNET = "10.203.0.0/24"


class TopologyError(RuntimeError):
    pass


def ip(*args: str, check: bool = True) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise TopologyError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def unavailable() -> str | None:
    """Why hosts cannot be built here, or None: root, `ip netns` and veth/bridge links."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth links)"
    if shutil.which("ip") is None:
        return "needs iproute2's `ip`"
    probe = f"{PREFIX}-probe-{os.getpid()}"
    try:
        ip("netns", "add", probe)
    except (TopologyError, OSError) as exc:
        return f"`ip netns add` fails here: {exc}"
    try:
        ip("-n", probe, "link", "add", "p0", "type", "veth", "peer", "name", "p1")
        ip("-n", probe, "link", "add", "b0", "type", "bridge")
    except TopologyError as exc:
        return f"veth or bridge links cannot be made here: {exc}"
    finally:
        ip("netns", "delete", probe, check=False)
    return None


@dataclass
class Host:
    name: str  # the namespace
    index: int  # 1-based
    address: str
    veth: str  # the root namespace's end, a port of the bridge: the host's "cable"


@dataclass
class Topology:
    tag: str
    subnet: ipaddress.IPv4Network
    bridge: str
    gateway: str  # the bridge's own address: the root namespace's (the client's) address
    hosts: list[Host] = field(default_factory=list)

    def host(self, index: int) -> Host:
        return self.hosts[index - 1]

    def cut(self, host: Host) -> None:
        """The host's link goes down: from now on nothing it sends arrives and nothing sent
        to it is answered, not even with a reset (the peers see silence, as with a
        pulled cable, never a refused connection)."""
        ip("link", "set", host.veth, "down")


def _ns_pids(namespace: str) -> list[int]:
    out = ip("netns", "pids", namespace, check=False)
    return [int(pid) for pid in out.split() if pid.isdigit()]


def kill_namespace_processes(namespace: str, timeout_s: float = 5.0) -> None:
    """SIGKILL every process in the namespace, by pid, until none is left: a namespace
    with a process in it outlives `ip netns delete`, and so would its addresses."""
    deadline = time.monotonic() + timeout_s
    while pids := _ns_pids(namespace):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise TopologyError(f"processes {pids} of {namespace} survive SIGKILL")
        time.sleep(0.05)


def _forward_rule(bridge: str) -> list[str]:
    return ["FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT"]


def allow_bridged(bridge: str) -> bool:
    """Let the hosts talk across the bridge whatever the firewall says. Where br_netfilter
    is loaded (Docker loads it, and sets the FORWARD policy to DROP), frames between two
    ports of a bridge pass iptables' FORWARD chain, and would be dropped; Docker accepts
    its own bridge's traffic the same way. Returns whether a rule was added."""
    if shutil.which("iptables") is None:
        return False  # no iptables: nothing filters bridged frames
    done = subprocess.run(["iptables", "-w", "-I", *_forward_rule(bridge)],
                          capture_output=True, text=True, timeout=30)  # fmt: skip
    if done.returncode != 0:
        raise TopologyError(f"iptables -I {' '.join(_forward_rule(bridge))}: {done.stderr}")
    return True


def disallow_bridged(bridge: str) -> None:
    if shutil.which("iptables") is not None:
        subprocess.run(["iptables", "-w", "-D", *_forward_rule(bridge)],
                       capture_output=True, timeout=30)  # fmt: skip


def remove_leftovers() -> list[str]:
    """Namespaces and links of runs that died before their cleanup (call under the lock)."""
    removed = []
    for line in ip("netns", "list", check=False).splitlines():
        name = line.split()[0] if line.strip() else ""
        if name.startswith(PREFIX + "-"):
            kill_namespace_processes(name)
            ip("netns", "delete", name, check=False)
            removed.append(name)
    for line in ip("-o", "link", "show", check=False).splitlines():
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if name.startswith(PREFIX) and name[len(PREFIX)] in "bv":
            if name[len(PREFIX)] == "b":
                disallow_bridged(name)
            ip("link", "delete", name, check=False)
            removed.append(name)
    return removed


def teardown(topology: Topology) -> list[str]:
    """Remove the run's processes, namespaces, veths and bridge; every step is tried
    whatever failed before it. Returns what could not be removed."""
    problems = []
    for host in topology.hosts:
        try:
            kill_namespace_processes(host.name)
        except TopologyError as exc:
            problems.append(str(exc))
        ip("netns", "delete", host.name, check=False)
        ip("link", "delete", host.veth, check=False)  # deleting one end deletes both
    disallow_bridged(topology.bridge)
    ip("link", "delete", topology.bridge, check=False)
    known = ip("netns", "list", check=False) + ip("-o", "link", "show", check=False)
    for name in [h.name for h in topology.hosts] + [topology.bridge]:
        if name in known:
            problems.append(f"{name} still exists")
    return problems


def build(topology: Topology, hosts: int) -> None:
    """Make the bridge and `hosts` hosts; each part is recorded on `topology` before it is
    made, so that `teardown` removes whatever a failure left half built."""
    network, tag = topology.subnet, topology.tag
    if not network.is_private or network.num_addresses < hosts + 16:
        raise TopologyError(f"{network}: needs a private IPv4 subnet of {hosts + 16}+ addresses")
    taken = ip("-o", "-4", "addr", "show")
    addresses = [str(network.network_address + n) for n in (1, *range(11, 11 + hosts))]
    for address in addresses:
        if f" {address}/" in taken:
            raise TopologyError(f"{address} is already an address of this machine")
    gateway, *host_addresses = addresses
    topology.gateway = gateway
    prefixlen = network.prefixlen
    ip("link", "add", topology.bridge, "type", "bridge")
    allow_bridged(topology.bridge)
    ip("addr", "add", f"{gateway}/{prefixlen}", "dev", topology.bridge)
    ip("link", "set", topology.bridge, "up")
    for index, address in enumerate(host_addresses, start=1):
        host = Host(f"{PREFIX}-{tag}-{index}", index, address, f"{PREFIX}v{tag}{index}")
        topology.hosts.append(host)  # appended first: a failure below still tears it down
        ip("netns", "add", host.name)
        peer = f"{PREFIX}p{tag}{index}"
        ip("link", "add", host.veth, "type", "veth", "peer", "name", peer, "netns", host.name)
        ip("link", "set", host.veth, "master", topology.bridge)
        ip("link", "set", host.veth, "up")
        ip("-n", host.name, "link", "set", peer, "name", "eth0")
        ip("-n", host.name, "addr", "add", f"{address}/{prefixlen}", "dev", "eth0")
        ip("-n", host.name, "link", "set", "eth0", "up")
        # Loopback is down in a new namespace; a process's own 127.0.0.1 (the sandbox's
        # zygote, a metrics scrape) must work.
        ip("-n", host.name, "link", "set", "lo", "up")


@contextmanager
def exclusive(wait_s: float = 300.0) -> Iterator[None]:
    """Hold the machine-wide lock of these names (a bench and a test must not interleave:
    they would share the subnet and remove each other's namespaces as leftovers)."""
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with LOCK.open("a") as handle:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TopologyError(f"another multi-host run holds {LOCK}") from None
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def hosts(count: int, subnet: str = DEFAULT_SUBNET) -> Iterator[Topology]:
    """`count` hosts on one bridge, removed on the way out whatever happened."""
    tag = os.urandom(2).hex()
    with exclusive():
        remove_leftovers()
        topology = Topology(tag, ipaddress.IPv4Network(subnet), f"{PREFIX}b{tag}", "")
        try:
            build(topology, count)
            yield topology
        except BaseException:
            teardown(topology)  # the original error is the one to report
            raise
        problems = teardown(topology)
        if problems:
            raise TopologyError("cleanup incomplete: " + "; ".join(problems))
