"""KEDA's Redis connection against the workers' own: the trigger's type, addresses, Sentinel
master, database, TLS and credentials, each compared with what JUDGE_REDIS_URL says.

A credential is compared by value where the chart holds it (its own Secrets), else by the
Secret and key both sides read (a Secret of the user's, which the chart cannot see). KEDA
reads a password from the metadata, ``passwordFromEnv`` (a variable of the scaled
Deployment's containers) or a TriggerAuthentication, never from a URL.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

from deploy.keda_params import AUTH, FROM_ENV, Given
from judge_service.errors import RedisUrlError
from judge_service.store.redis_url import check_redis_url, is_sentinel, parse_sentinel_url


@dataclass(frozen=True)
class Cred:
    """A credential: its value where known, and the Secret (name, key) it comes from."""

    value: str | None = None
    ref: tuple[str, str] | None = None

    def same(self, other: Cred) -> bool:
        if self.value is not None and other.value is not None:
            return self.value == other.value
        return self.ref is not None and self.ref == other.ref


@dataclass(frozen=True)
class Connection:
    """A Redis connection as KEDA's parameters name it."""

    kind: str
    addresses: frozenset[str]
    sentinel_master: str = ""
    database: int = 0
    tls: bool = False
    unsafe_ssl: bool = False
    credentials: tuple[tuple[str, Cred | None], ...] = ()


# `$(NAME)` in JUDGE_REDIS_URL, expanded by the kubelet from the variable defined before it.
PLACEHOLDER = "$(REDIS_PASSWORD)"


def workers_connection(url: str, env: Mapping[str, Cred]) -> Connection | str:
    """The workers' Redis as KEDA would have to name it, or why KEDA cannot."""
    password_ref = env.get("REDIS_PASSWORD") if PLACEHOLDER in url else None
    real = url.replace(PLACEHOLDER, "password")
    try:
        check_redis_url(real)
    except RedisUrlError as exc:
        return f"the service refuses JUDGE_REDIS_URL: {exc}"
    if is_sentinel(real):
        parsed = parse_sentinel_url(real)
        if parsed.ssl:
            return (
                "JUDGE_REDIS_URL is rediss+sentinel:// (TLS to the primary only); KEDA's "
                "Sentinel scaler uses one TLS setting for the sentinels and the primary"
            )
        password = password_ref or _cred(parsed.password)
        return Connection(
            "redis-sentinel-streams",
            frozenset(f"{host}:{port}" for host, port in parsed.sentinels),
            sentinel_master=parsed.service,
            database=parsed.db,
            credentials=(
                ("username", _cred(parsed.username)),
                ("password", password),
                ("sentinelUsername", _cred(parsed.sentinel_auth.get("username"))),
                ("sentinelPassword", _cred(parsed.sentinel_auth.get("password"))),
            ),
        )
    plain = urlsplit(real)
    if plain.scheme == "unix":
        return "JUDGE_REDIS_URL is a unix socket, which KEDA cannot reach"
    query = parse_qs(plain.query)
    database = int(query.get("db", [plain.path.strip("/") or "0"])[-1])
    password = password_ref or _cred(unquote(plain.password) if plain.password else None)
    return Connection(
        "redis-streams",
        frozenset({f"{plain.hostname}:{plain.port or 6379}"}),
        database=database,
        tls=plain.scheme == "rediss",
        unsafe_ssl=query.get("ssl_cert_reqs", [""])[-1].lower() == "none",
        credentials=(
            ("username", _cred(unquote(plain.username) if plain.username else None)),
            ("password", password),
        ),
    )


def _cred(value: str | None) -> Cred | None:
    return None if value is None else Cred(value=value)


def given_cred(given: Given, env: Mapping[str, Cred], auth: Mapping[str, Cred]) -> Cred:
    """What one given parameter resolves to, wherever KEDA reads it from."""
    if given.source == FROM_ENV:
        return env.get(given.value or "", Cred())
    if given.source == AUTH:
        return auth.get(given.spelled, Cred())
    return Cred(value=given.value)


def check_connection(
    where: str,
    trigger_type: str,
    found: Mapping[str, list[Given]],
    want: Connection,
    env: Mapping[str, Cred],
    auth: Mapping[str, Cred],
) -> Iterator[str]:
    """Every way the trigger's connection differs from the workers' (`want`)."""

    def value(name: str) -> str | None:
        given = found.get(name)
        return given_cred(given[0], env, auth).value if given else None

    if trigger_type != want.kind:
        yield f"{where}: type {trigger_type}, the workers' URL needs {want.kind}"
    address = "address" if trigger_type == "redis-streams" else "addresses"
    listed = value(address)
    if listed is None:
        single = trigger_type == "redis-streams"
        hosts, ports = value("host" if single else "hosts"), value("port" if single else "ports")
        pairs = zip((hosts or "").split(","), (ports or "").split(","), strict=False)
        listed = ",".join(f"{h}:{p}" for h, p in pairs)
    addresses = frozenset(a.strip() for a in listed.split(",") if a.strip())
    if addresses != want.addresses:
        yield f"{where}: {address} {sorted(addresses)}, the workers use {sorted(want.addresses)}"
    if (value("sentinelMaster") or "") != want.sentinel_master:
        yield (
            f"{where}: sentinelMaster {value('sentinelMaster')!r}, the workers' primary is "
            f"{want.sentinel_master!r}"
        )
    database = value("databaseIndex") or "0"
    if database != str(want.database):
        yield f"{where}: databaseIndex {database}, the workers use database {want.database}"
    tls = value("enableTLS") == "true" or value("tls") == "enable"
    if tls != want.tls:
        yield f"{where}: TLS {'on' if tls else 'off'} (enableTLS), the workers' is " + (
            "on" if want.tls else "off"
        )
    if (value("unsafeSsl") == "true") != want.unsafe_ssl:
        yield f"{where}: unsafeSsl {value('unsafeSsl')!r}, the workers verify " + (
            "no certificate (ssl_cert_reqs=none)" if want.unsafe_ssl else "the certificate"
        )
    for name, cred in want.credentials:
        given = found.get(name)
        have = given_cred(given[0], env, auth) if given else None
        if cred is None and have is not None:
            yield f"{where}: parameter {name!r} is given, the workers' URL has none"
        elif cred is not None and have is None:
            yield (
                f"{where}: the workers' URL has a {name}, KEDA none (no {name!r} from a "
                "TriggerAuthentication, metadata or FromEnv)"
            )
        elif cred is not None and have is not None and not cred.same(have):
            yield f"{where}: parameter {name!r} is not the workers' {name}"
