"""A real Redis primary, one replica and three Sentinels on loopback ports, for failover tests.

Every process is Debian's ``redis-server`` (a Sentinel is ``redis-server CONF --sentinel``),
so nothing beyond the binary the other Redis tests need is required. The replica
authenticates to the primary as its own ACL user, ``repl``: switching that user off and
dropping its connection cuts replication for certain, so a test can make the primary
acknowledge writes that no replica holds (what asynchronous replication loses at a
failover) instead of hoping to hit the window by chance.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis

from tests.redis_support import free_port, wait_until

SERVICE = "judgeprimary"
DOWN_AFTER_MS = 1000  # a primary silent this long is down (Sentinel's default is 30 s)
_REPL_PASSWORD = "repl-secret"


class SentinelCluster:
    def __init__(self, directory: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail(
                "needs the redis-server binary on PATH (apt-get install redis-server)",
                pytrace=False,
            )
        self.binary = binary
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.primary_port, self.replica_port = free_port(), free_port()
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    def start(self) -> SentinelCluster:
        self._server("primary", self.primary_port, [])
        self._server(
            "replica",
            self.replica_port,
            [
                f"replicaof 127.0.0.1 {self.primary_port}",
                "masteruser repl",
                f"masterauth {_REPL_PASSWORD}",
            ],
        )
        wait_until(self._replica_linked, 20, "the replica to sync with the primary", 0.1)
        for k, port in enumerate(self.sentinel_ports):
            self._spawn(
                f"sentinel{k}",
                [
                    f"port {port}",
                    "bind 127.0.0.1",
                    f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary_port} 2",
                    f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}",
                    f"sentinel failover-timeout {SERVICE} 5000",
                ],
                sentinel=True,
            )
        wait_until(self._sentinels_agree, 20, "three sentinels that know the replica", 0.1)
        return self

    def _server(self, name: str, port: int, extra: list[str]) -> None:
        self._spawn(
            name,
            [
                f"port {port}",
                "bind 127.0.0.1",
                'save ""',
                "appendonly no",
                "user default on nopass ~* &* +@all",
                f"user repl on >{_REPL_PASSWORD} +psync +replconf +ping",
                *extra,
            ],
        )

    def _spawn(self, name: str, lines: list[str], sentinel: bool = False) -> None:
        # A Sentinel rewrites its own file (the state it learns), so each gets its own.
        conf = self.directory / f"{name}.conf"
        conf.write_text("\n".join([*lines, f"dir {self.directory}"]) + "\n")
        args = [self.binary, str(conf), *(["--sentinel"] if sentinel else [])]
        with (self.directory / f"{name}.log").open("ab") as log:
            self.processes[name] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)

    def client(self, port: int) -> redis.Redis:
        return redis.Redis(port=port, socket_connect_timeout=0.5, decode_responses=True)

    def _replica_linked(self) -> bool:
        try:
            info = self.client(self.replica_port).info("replication")
        except redis.RedisError:
            return False
        return info.get("master_link_status") == "up"

    def _sentinels_agree(self) -> bool:
        try:
            return all(
                len(self.client(port).sentinel_slaves(SERVICE)) == 1
                and self.primary_address(port) == self.primary_port
                for port in self.sentinel_ports
            )
        except redis.RedisError:
            return False

    def primary_address(self, sentinel_port: int | None = None) -> int | None:
        port = sentinel_port or self.sentinel_ports[0]
        try:
            address = self.client(port).sentinel_get_master_addr_by_name(SERVICE)
        except redis.RedisError:
            return None
        return int(address[1]) if address else None

    def cut_replication(self) -> None:
        """From now on the primary acknowledges writes the replica never gets."""
        primary = self.client(self.primary_port)
        primary.acl_setuser("repl", enabled=False)
        primary.execute_command("CLIENT", "KILL", "USER", "repl")
        wait_until(lambda: not self._replica_linked(), 10, "the replica to lose its link", 0.05)

    def kill_primary(self) -> float:
        """SIGKILL the primary; returns the monotonic time of the kill."""
        process = self.processes["primary"]
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        return time.monotonic()

    def wait_failover(self, timeout: float = 30) -> float:
        """Block until the sentinels name the replica as primary; the monotonic time then."""
        wait_until(
            lambda: self.primary_address() == self.replica_port,
            timeout,
            "the sentinels to promote the replica",
            0.05,
        )
        return time.monotonic()

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)

    def __enter__(self) -> SentinelCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
