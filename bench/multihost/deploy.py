"""The deployment: host 1 runs Redis and haproxy; every other host one API replica and
its workers, all pointed at host 1's Redis. Everything is torn down on the way out."""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import redis

from bench.multihost import haproxy
from bench.multihost.netns import Host, Topology, hosts
from bench.multihost.procs import (
    HAPROXY_PORT,
    REDIS_PORT,
    Fleet,
    api_argv,
    redis_argv,
    service_env,
    wait_for,
    worker_argv,
)


@dataclass
class Deployment:
    topology: Topology
    fleet: Fleet
    stats_socket: Path
    prefix: str  # JUDGE_REDIS_PREFIX: the queue is <prefix>:queue
    workers_per_host: int
    cut_hosts: list[Host] = field(default_factory=list)

    @property
    def front(self) -> Host:
        return self.topology.host(1)

    @property
    def replicas(self) -> list[Host]:
        return self.topology.hosts[1:]

    @property
    def url(self) -> str:
        return f"http://{self.front.address}:{HAPROXY_PORT}"

    @property
    def redis_url(self) -> str:
        return f"redis://{self.front.address}:{REDIS_PORT}/0"

    def redis(self) -> redis.Redis:
        return redis.Redis.from_url(self.redis_url, socket_timeout=2, decode_responses=True)

    def server_status(self) -> dict[str, str]:
        return haproxy.server_status(self.stats_socket)

    def worker_names(self, host: Host) -> list[str]:
        return [f"{host.name}-w{i}" for i in range(self.workers_per_host)]

    def pending_by_consumer(self) -> dict[str, int]:
        """Rollouts each worker holds now (delivered, not acknowledged)."""
        client = self.redis()
        try:
            rows = client.xinfo_consumers(f"{self.prefix}:queue", "judges")
        finally:
            client.close()
        return {row["name"]: int(row["pending"]) for row in rows}

    def held_by_job(self, host: Host) -> Counter[str]:
        """Rollouts the host's workers hold now, by job id: which jobs a cut would orphan.
        (A stream entry names its job; the pending list names only the entry.)"""
        queue = f"{self.prefix}:queue"
        client = self.redis()
        try:
            entries = [
                row["message_id"]
                for name in self.worker_names(host)
                for row in client.xpending_range(queue, "judges", "-", "+", 10_000, name)
            ]
            pipe = client.pipeline(transaction=False)
            for entry in entries:
                pipe.xrange(queue, entry, entry)
            found = pipe.execute() if entries else []
        finally:
            client.close()
        # An entry deleted since (its job removed) comes back empty or without fields.
        return Counter(fields["job"] for rows in found for _, fields in rows if fields)

    def cut(self, host: Host) -> float:
        """Cut the host off: its link down first (nothing it says after this arrives: no
        reset, no last write), then SIGKILL its processes. Returns the monotonic time of
        the link going down: the failover clock starts there."""
        self.topology.cut(host)
        at = time.monotonic()
        self.fleet.kill(self.fleet.on(host))
        self.cut_hosts.append(host)
        return at

    def live_problems(self) -> list[str]:
        alive = [p for p in self.fleet.procs if p.host not in self.cut_hosts]
        return self.fleet.died(alive)

    def wait_ready(self, timeout_s: float) -> None:
        """Every replica UP at haproxy, every worker's heartbeat fresh."""
        names = {h.name for h in self.replicas if h not in self.cut_hosts}
        want = sum(len(self.worker_names(h)) for h in self.replicas if h not in self.cut_hosts)

        def ready() -> bool:
            if problems := self.live_problems():
                raise RuntimeError("a process died while starting: " + "; ".join(problems))
            try:
                status = self.server_status()
                body = httpx.get(self.url + "/readyz", timeout=3).json()
            except (OSError, httpx.HTTPError, ValueError):
                return False
            separate = body.get("checks", {}).get("workers", {}).get("separate")
            return all(status.get(n) == "UP" for n in names) and separate == want

        wait_for(ready, timeout_s, f"{len(names)} replicas up and {want} workers alive", 0.25)


@contextmanager
def deployed(
    replicas: int = 2,
    workers_per_host: int = 2,
    timing: haproxy.Timing | None = None,
    settings: dict[str, str] | None = None,
    extra_env: Callable[[Topology], dict[str, str]] | None = None,
    logs: Path | None = None,
    ready_timeout_s: float = 120.0,
) -> Iterator[Deployment]:
    """The whole deployment up and ready; on the way out every process is killed and
    every namespace, veth and the bridge removed (netns.hosts), whatever happened.
    `extra_env`: more environment for the APIs and workers, made once the hosts exist."""
    logs = logs or Path(tempfile.mkdtemp(prefix="judge-multihost-"))
    logs.mkdir(parents=True, exist_ok=True)
    with hosts(1 + replicas) as topology:
        fleet = Fleet(logs)
        try:
            front = topology.host(1)
            plain = service_env("", "", {})  # PATH and the rest, no JUDGE_* settings
            fleet.start(front, "redis", redis_argv(front), plain)
            stats = logs / "haproxy.sock"
            cfg = logs / "haproxy.cfg"
            cfg.write_text(
                haproxy.config(front, topology.hosts[1:], stats, logs, timing or haproxy.Timing())
            )
            check = fleet.start(front, "haproxy-check", ["haproxy", "-c", "-f", str(cfg)], plain)
            if check.popen.wait(timeout=30) != 0:
                raise RuntimeError(f"haproxy rejects {cfg}: {check.log.read_text()}")
            fleet.procs.remove(check)
            fleet.start(front, "haproxy", ["haproxy", "-db", "-f", str(cfg)], plain)
            deployment = Deployment(topology, fleet, stats, f"mh-{topology.tag}", workers_per_host)
            wait_for(_answers(deployment), 30, "Redis on host 1")
            extra = {**(settings or {}), **(extra_env(topology) if extra_env else {})}
            env = service_env(deployment.redis_url, deployment.prefix, extra)
            for host in deployment.replicas:
                fleet.start(host, "api", api_argv(host), env)
                for i, name in enumerate(deployment.worker_names(host)):
                    fleet.start(host, f"worker{i}", worker_argv(name), env)
            deployment.wait_ready(ready_timeout_s)
            yield deployment
        finally:
            fleet.stop()


def _answers(deployment: Deployment) -> Callable[[], bool]:
    def ping() -> bool:
        client = deployment.redis()
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()

    return ping
