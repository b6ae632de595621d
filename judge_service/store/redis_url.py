"""``JUDGE_REDIS_URL``: a plain Redis URL, or a Sentinel URL naming the sentinels and the service.

redis-py reads ``redis://``, ``rediss://`` and ``unix://`` URLs itself but has no URL
form for Sentinel, so the form used by most Redis clients that take one (Sidekiq,
kombu's ``sentinel://``, the ``redis-sentinel-url`` package) is read here::

    redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/service[/db][?query]
    rediss+sentinel://...   the same, TLS to the primary

The user and password are the primary's (the data connections'); a sentinel that
needs its own password takes ``?sentinel_password=...`` (and ``sentinel_username``).
A host without a port is on 26379, Sentinel's default. The client asks the sentinels
for the current primary on every new connection, and a connection to a primary that
was demoted fails (redis-py raises a connection error on a READONLY reply), so a
failover costs the connections that were open, not a restart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

from judge_service.errors import RedisUrlError

# redis-py (~0.15 s to import) loads when a URL is checked or opened: config/serving.py
# imports this module, and a server without JUDGE_REDIS_URL never needs the client.
if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from redis.asyncio.sentinel import Sentinel

SENTINEL_SCHEMES = {"redis+sentinel": False, "rediss+sentinel": True}  # scheme -> TLS
SENTINEL_PORT = 26379
_QUERY = {"sentinel_password", "sentinel_username"}


@dataclass(frozen=True)
class SentinelUrl:
    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    ssl: bool = False
    sentinel_auth: dict[str, str] = field(default_factory=dict)

    def redacted(self) -> str:
        hosts = ",".join(f"{h}:{p}" for h, p in self.sentinels)
        return f"sentinel {self.service} via {hosts} (db {self.db})"


def is_sentinel(url: str) -> bool:
    return url.partition("://")[0].lower() in SENTINEL_SCHEMES


def parse_sentinel_url(url: str) -> SentinelUrl:
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in SENTINEL_SCHEMES:
        raise RedisUrlError(
            f"not a Sentinel URL (scheme must be one of {sorted(SENTINEL_SCHEMES)})"
        )
    # urlsplit cannot read a comma-separated host list as a netloc with ports, so the
    # authority is split by hand and only the path and query go through it.
    authority, slash, tail = rest.partition("/")
    parts = urlsplit("x://h/" + tail) if slash else urlsplit("x://h")
    userinfo, at, hosts = authority.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    sentinels = tuple(_host_port(h) for h in hosts.split(","))
    segments = [unquote(s) for s in parts.path.split("/") if s]
    if not segments:
        raise RedisUrlError("a Sentinel URL needs the service name after the hosts: .../mymaster")
    if len(segments) > 2:
        raise RedisUrlError("a Sentinel URL's path is /service or /service/db")
    db = 0
    if len(segments) == 2:
        if not segments[1].isdigit():
            raise RedisUrlError(f"the database must be a number, not {segments[1]!r}")
        db = int(segments[1])
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - _QUERY)
    if unknown:
        raise RedisUrlError(f"unknown Sentinel URL option(s) {unknown}; known: {sorted(_QUERY)}")
    sentinel_auth = {k.removeprefix("sentinel_"): v[-1] for k, v in query.items()}
    return SentinelUrl(
        sentinels=sentinels,
        service=segments[0],
        db=db,
        username=username,
        password=password,
        ssl=SENTINEL_SCHEMES[scheme.lower()],
        sentinel_auth=sentinel_auth,
    )


def _host_port(text: str) -> tuple[str, int]:
    if not text:
        raise RedisUrlError("a Sentinel URL lists host[:port] of each sentinel, comma-separated")
    if text.startswith("["):  # [::1]:26379
        host, _, port = text[1:].partition("]")
        port = port.removeprefix(":")
    else:
        host, _, port = text.rpartition(":") if ":" in text else (text, "", "")
    if not host:
        raise RedisUrlError(f"sentinel {text!r} has no host")
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        raise RedisUrlError(f"sentinel {text!r} has no valid port")
    return host, int(port) if port else SENTINEL_PORT


def check_redis_url(url: str) -> None:
    """Raise RedisUrlError when the URL cannot be connected with (read at startup)."""
    if is_sentinel(url):
        parse_sentinel_url(url)
        return
    import redis.asyncio as aioredis

    try:
        aioredis.connection.parse_url(url)
    except ValueError as exc:
        raise RedisUrlError(str(exc)) from exc


def open_client(url: str, **kwargs: Any) -> tuple[aioredis.Redis, Sentinel | None]:
    """A client for the URL's Redis (the Sentinel's current primary for a Sentinel URL),
    with `kwargs` on every data connection; the Sentinel, when there is one, to close too."""
    import redis.asyncio as aioredis
    from redis.asyncio.sentinel import Sentinel

    if not is_sentinel(url):
        return aioredis.Redis.from_url(url, **kwargs), None
    target = parse_sentinel_url(url)
    timeouts: dict[str, Any] = {
        k: kwargs[k] for k in ("socket_timeout", "socket_connect_timeout") if k in kwargs
    }
    # redis < 8.2 ships Sentinel.__init__ untyped, 8.2 typed: the ignore serves either.
    sentinel = Sentinel(  # type: ignore[no-untyped-call,unused-ignore]
        list(target.sentinels),
        sentinel_kwargs={**timeouts, **target.sentinel_auth},
        db=target.db,
        username=target.username,
        password=target.password,
        ssl=target.ssl,
        **kwargs,
    )
    return sentinel.master_for(target.service), sentinel
