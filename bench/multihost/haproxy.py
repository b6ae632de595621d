"""haproxy in front of the API replicas: its configuration, and its servers' state read
from its stats socket."""

from __future__ import annotations

import csv
import io
import socket
from dataclasses import dataclass
from pathlib import Path

from bench.multihost.netns import Host
from bench.multihost.procs import API_PORT, HAPROXY_PORT

BACKEND = "judges"
LOG_MARK = "mhreq"


@dataclass(frozen=True)
class Timing:
    """Health checks and timeouts, in milliseconds."""

    inter_ms: int = 300  # a check every 0.3 s while up...
    fall: int = 2  # ...down after 2 failed in a row: ~0.6-1.2 s after a host goes silent
    rise: int = 2
    check_timeout_ms: int = 500
    connect_ms: int = 500
    # The longest a request may wait for its answer: a host cut mid-request never answers
    # (no reset crosses a cut link), so this is how long such a request is stuck before
    # haproxy sends it elsewhere. It must exceed the slowest answer of a live replica
    # (a batch judged on a loaded host), or live requests would be retried too.
    server_ms: int = 5000


# haproxy's own errors (no server left, a server that reset or never answered) become a
# 503 with retry-after: the client retries 429 and 503 only, and every call through this
# proxy can be sent again safely (judging is a pure function of the request; a job
# submission carries an idempotency key). Without this a 502/504 would reach the caller.
RETRYABLE = (
    "HTTP/1.1 503 Service Unavailable\r\n"
    "content-type: application/json\r\n"
    "retry-after: 1\r\n"
    "cache-control: no-cache\r\n"
    "connection: close\r\n"
    "x-haproxy-error: {code}\r\n"
    "\r\n"
    '{{"detail": "no API replica answered ({code} at the load balancer); retry"}}\n'
)


def config(frontend: Host, replicas: list[Host], stats_socket: Path, errors_dir: Path,
           timing: Timing) -> str:  # fmt: skip
    errorfiles = []
    for code in (502, 503, 504):
        path = errors_dir / f"{code}.http"
        path.write_text(RETRYABLE.format(code=code), encoding="ascii")
        errorfiles.append(f"    errorfile {code} {path}")
    servers = [
        f"    server {h.name} {h.address}:{API_PORT} check" for h in replicas
    ]  # fmt: skip
    t = timing
    return "\n".join([
        "global",
        f"    stats socket {stats_socket} mode 600 level admin",
        "    maxconn 2000",
        "    log stdout format raw local0 info",
        "",
        "defaults",
        "    mode http",
        "    log global",
        f"    timeout connect {t.connect_ms}ms",
        "    timeout client 60s",
        f"    timeout server {t.server_ms}ms",
        "    timeout http-request 10s",
        "    timeout queue 5s",
        f"    timeout check {t.check_timeout_ms}ms",
        *errorfiles,
        "",
        "frontend api",
        f"    bind {frontend.address}:{HAPROXY_PORT}",
        # One line per request: the driver's call name, the server, haproxy's retries
        # ("+" when redispatched), the status and the termination state.
        "    capture request header x-call len 80",
        f'    log-format "{LOG_MARK} %hr %HM %HPO %s %rc %ST %Ta %tsc"',
        f"    default_backend {BACKEND}",
        "",
        f"backend {BACKEND}",
        "    balance roundrobin",
        "    option httpchk GET /readyz",
        "    http-check expect status 200",
        f"    default-server inter {t.inter_ms}ms fastinter {t.inter_ms}ms "
        f"downinter {t.inter_ms}ms fall {t.fall} rise {t.rise} on-marked-down shutdown-sessions",
        # A request whose server failed or never answered is sent again, to another server
        # each time (redispatch 1): every call here is idempotent (see RETRYABLE). A job
        # submission is the exception haproxy cannot see into (its idempotency key is in
        # the body): it is retried only when it never reached a server, and otherwise
        # left to the client, whose retry sends the same key.
        "    retries 3",
        # The whole body is read before a server is chosen: a request can only be sent
        # again (retry-on) if haproxy still holds all of it.
        "    option http-buffer-request",
        "    option redispatch 1",
        "    retry-on conn-failure empty-response response-timeout 502 503 504",
        "    http-request disable-l7-retry if METH_POST { path /v1/jobs }",
        # Which replica answered: the driver times failover by it.
        "    http-response set-header x-served-by %s",
        *servers,
        "",
    ])  # fmt: skip


def command(stats_socket: Path, line: str, timeout_s: float = 2.0) -> str:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect(str(stats_socket))
        sock.sendall(line.encode() + b"\n")
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode()


def server_status(stats_socket: Path) -> dict[str, str]:
    """Each server of the backend: UP, DOWN, "UP 1/2" (rising) or "DOWN 1/2" (falling)."""
    text = command(stats_socket, "show stat").lstrip("# ")
    rows = csv.DictReader(io.StringIO(text))
    return {
        row["svname"]: row["status"]
        for row in rows
        if row["pxname"] == BACKEND and row["svname"] not in ("FRONTEND", "BACKEND")
    }


@dataclass(frozen=True)
class Logged:
    call: str
    server: str
    retries: int
    redispatched: bool
    status: int
    termination: str


def requests_logged(log: Path) -> list[Logged]:
    """The request lines of haproxy's log (see `config`'s log-format)."""
    found = []
    for line in log.read_text(errors="replace").splitlines():
        parts = line.split()
        if len(parts) < 9 or parts[0] != LOG_MARK:
            continue
        _, call, _method, _path, server, retries, status, _ta, termination = parts[:9]
        found.append(Logged(call.strip("{}"), server, int(retries.lstrip("+")),
                            retries.startswith("+"), int(status), termination))  # fmt: skip
    return found
