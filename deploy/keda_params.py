"""What KEDA v2.20's Redis Streams scalers read from a trigger, as tables, and a check of a
trigger against them.

A trigger's metadata is a free string map in the ScaledObject CRD, and KEDA ignores a name
it does not read (it only logs one, and only with KEDA_CHECK_UNEXPECTED_SCALERS_PARAMS), so
a misspelt or misplaced parameter passes every schema and the scaler silently runs on its
default. Read from kedacore/keda v2.20.2 (commit 68a5b5028f35b22d50597c69819ab32c4e92f21a):

- pkg/scalers/redis_streams_scaler.go, ``redisStreamsMetadata``: ``pendingEntriesCount``
  (default 5), ``streamLength`` (default 5), ``lagCount``, ``stream`` (required),
  ``consumerGroup``, ``databaseIndex``, ``activationLagCount`` (default 0), ``enableTLS``
  from the metadata, ``tls`` from the TriggerAuthentication. ``Validate`` picks the
  measure by what is set: with ``consumerGroup``, lag when ``lagCount`` is non-zero, else
  XPENDING (``streamLength`` then ignored); without it XLEN (the counts then ignored).
- pkg/scalers/redis_scaler.go, ``redisConnectionInfo`` (shared by every Redis scaler):
  ``address;addresses``, ``host;hosts`` and ``port;ports`` (each pair two names of one
  setting since the config refactor, kedacore/keda #5997, v2.16), ``username``,
  ``password``, ``sentinelUsername``, ``sentinelPassword``, ``sentinelMaster`` from the
  metadata, the TriggerAuthentication or ``<name>FromEnv``; ``unsafeSsl`` from the
  metadata; ``cert``, ``key``, ``keyPassword``, ``ca`` from the TriggerAuthentication
  only. ``validateRedisAddress`` appends every host:port to the addresses, and
  ``getRedisClient`` (redis-streams) dials only ``Addresses[0]``; the cluster client
  takes no database; only the Sentinel client reads the sentinel fields.
- pkg/scalers/scalersconfig/typed_config.go: an integer is parsed as JSON (``8`` yes,
  ``8.0``, ``+8``, ``08`` no), a bool by Go's strconv.ParseBool; for each name the
  metadata is looked up first, so a name given twice is silently the metadata's.
- pkg/scaling/scalers_builder.go: redis-streams, redis-sentinel-streams and
  redis-cluster-streams are one scaler with isSentinel / isClustered set.

Documented names (keda.sh/docs/2.20/scalers/redis-streams, redis-sentinel-streams,
redis-cluster-streams): ``address``, ``host`` and ``port`` for redis-streams; ``addresses``,
``hosts`` and ``ports`` for the Sentinel and Cluster scalers. KEDA v2.15 and older read only
those (a Sentinel trigger with ``address`` failed: "no address or host given"), so the
other spelling of an alias is refused as undocumented.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

# The forms KEDA parses a value in (typed_config.go), as plain strings.
UINT = re.compile(r"^(0|[1-9][0-9]*)$")
POSITIVE = re.compile(r"^[1-9][0-9]*$")
BOOL = re.compile(r"^(true|false)$")
HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):([1-9][0-9]{0,4})$")
NAME = re.compile(r"^\S+$")
TLS_SWITCH = re.compile("^(enable|disable)$")

METADATA, FROM_ENV, AUTH = "metadata", "FromEnv", "TriggerAuthentication"
MEASURES = ("lagCount", "pendingEntriesCount", "streamLength")


@dataclass(frozen=True)
class Param:
    """One setting KEDA reads: `name` is the documented spelling, `aliases` the others KEDA
    also reads for it (refused as undocumented); `sources` where KEDA looks for it."""

    name: str
    form: re.Pattern[str] = NAME
    aliases: tuple[str, ...] = ()
    sources: frozenset[str] = frozenset({METADATA})
    secret: bool = False  # never a plaintext metadata value
    form_text: str = "a non-empty string without spaces"


_CONNECTION = frozenset({METADATA, FROM_ENV, AUTH})


def _count(name: str) -> Param:
    # A target of 0 is no target; a lagCount of 0 even switches the trigger to XPENDING.
    return Param(name, POSITIVE, form_text="a positive integer as a plain decimal string")


def _uint(name: str) -> Param:
    return Param(name, UINT, form_text="a non-negative integer as a plain decimal string")


def _bool(name: str) -> Param:
    return Param(name, BOOL, form_text='"true" or "false"')


def _stream_params(*, single: bool, sentinel: bool, database: bool) -> dict[str, Param]:
    """The parameters of one Redis Streams trigger type, by every name KEDA reads."""
    plural = ("address", "addresses"), ("host", "hosts"), ("port", "ports")
    params = [
        Param("stream"),
        Param("consumerGroup"),
        *(_count(name) for name in MEASURES),
        _uint("activationLagCount"),
        _bool("enableTLS"),
        _bool("unsafeSsl"),
        Param("tls", TLS_SWITCH, sources=frozenset({AUTH}), form_text='"enable" or "disable"'),
        Param("username", sources=_CONNECTION),
        Param("password", sources=_CONNECTION, secret=True),
        *(Param(n, sources=frozenset({AUTH}), secret=True) for n in ("ca", "cert", "key")),
        Param("keyPassword", sources=frozenset({AUTH}), secret=True),
    ]
    for one, many in plural:
        documented, alias = (one, many) if single else (many, one)
        params.append(Param(documented, aliases=(alias,), sources=_CONNECTION))
    if database:
        params.append(_uint("databaseIndex"))
    if sentinel:
        params += [
            Param("sentinelMaster", sources=_CONNECTION),
            Param("sentinelUsername", sources=_CONNECTION),
            Param("sentinelPassword", sources=_CONNECTION, secret=True),
        ]
    return {name: p for p in params for name in (p.name, *p.aliases)}


SCALERS: dict[str, dict[str, Param]] = {
    "redis-streams": _stream_params(single=True, sentinel=False, database=True),
    "redis-sentinel-streams": _stream_params(single=False, sentinel=True, database=True),
    "redis-cluster-streams": _stream_params(single=False, sentinel=False, database=False),
}


@dataclass(frozen=True)
class Given:
    """Where a trigger gives one parameter: its source and the value (None: from a Secret
    or an environment variable the check cannot read)."""

    source: str
    value: str | None
    spelled: str  # the name as written


def parameters(
    trigger: Mapping[str, object], auth_parameters: Mapping[str, str | None]
) -> tuple[dict[str, list[Given]], list[str]]:
    """A trigger's parameters by documented name, from its metadata (``<name>FromEnv``
    included) and its TriggerAuthentication's parameters; and the names KEDA does not read
    for this type."""
    table = SCALERS[str(trigger["type"])]
    found: dict[str, list[Given]] = {}
    unknown: list[str] = []
    metadata = trigger.get("metadata") or {}
    assert isinstance(metadata, dict)
    entries = [(METADATA, str(k), v) for k, v in metadata.items()]
    entries += [(AUTH, k, v) for k, v in auth_parameters.items()]
    for source, spelled, value in entries:
        name = spelled
        if source == METADATA and spelled.endswith("FromEnv"):
            source, name = FROM_ENV, spelled.removesuffix("FromEnv")
        param = table.get(name)
        if param is None or source not in param.sources:
            unknown.append(f"{spelled} ({source})")
            continue
        found.setdefault(param.name, []).append(Given(source, value, name))
    return found, unknown


def check_trigger(
    where: str, trigger: Mapping[str, object], auth_parameters: Mapping[str, str | None]
) -> Iterator[str]:
    """Every way this trigger is not what KEDA v2.20 reads as intended; `where` names it."""
    kind = str(trigger.get("type"))
    if kind not in SCALERS:
        yield f"{where}: type {kind!r} is not one this check knows ({sorted(SCALERS)})"
        return
    table = SCALERS[kind]
    found, unknown = parameters(trigger, auth_parameters)
    for name in unknown:
        yield f"{where}: {name} is not a parameter KEDA's {kind} scaler reads"
    for name, given in found.items():
        param = table[name]
        if len(given) > 1:
            places = ", ".join(f"{g.spelled} ({g.source})" for g in given)
            yield f"{where}: {name} is given {len(given)} times ({places}); KEDA reads one"
        for g in given:
            if g.spelled != name:
                yield (
                    f"{where}: parameter {g.spelled!r} is undocumented for {kind}: KEDA's "
                    f"documentation names it {name!r}, and KEDA v2.15 and older read no other"
                )
            if param.secret and g.source == METADATA:
                yield (
                    f"{where}: parameter {g.spelled!r} is a secret in plaintext metadata; "
                    f"give it through a TriggerAuthentication (or {name}FromEnv)"
                )
            if g.source == METADATA and g.value is not None and not param.form.match(g.value):
                yield f"{where}: parameter {g.spelled!r} is {g.value!r}, not {param.form_text}"
    yield from _groups(where, kind, found)


def _groups(where: str, kind: str, found: Mapping[str, list[Given]]) -> Iterator[str]:
    """Required parameters and exclusive groups (KEDA's Validate and validateRedisAddress)."""
    address = "address" if kind == "redis-streams" else "addresses"
    host, port = ("host", "port") if kind == "redis-streams" else ("hosts", "ports")
    if "stream" not in found:
        yield f"{where}: parameter 'stream' is required"
    if address in found and (host in found or port in found):
        yield f"{where}: {address!r} and {host!r}/{port!r} together: KEDA dials both lists"
    elif address not in found and not (host in found and port in found):
        yield f"{where}: parameter {address!r} (or {host!r} and {port!r}) is required"
    values = {name: given[0].value for name, given in found.items()}
    if kind == "redis-streams" and len((values.get(address) or "").split(",")) > 1:
        yield f"{where}: parameter {address!r} lists several; redis-streams dials only the first"
    for item in (values.get(address) or "").split(",") if values.get(address) else []:
        if not HOST_PORT.match(item.strip()):
            yield f"{where}: parameter {address!r} holds {item!r}, not host:port"
    hosts, ports = values.get(host), values.get(port)
    if hosts and ports and len(hosts.split(",")) != len(ports.split(",")):
        yield f"{where}: {host!r} and {port!r} differ in length"
    measures = [m for m in MEASURES if m in found]
    if len(measures) > 1:
        yield (
            f"{where}: {' and '.join(measures)} together: KEDA scales on one "
            "(lagCount over pendingEntriesCount; streamLength only without consumerGroup)"
        )
    elif "consumerGroup" in found and "streamLength" in found:
        yield f"{where}: parameter 'streamLength' is ignored with a consumerGroup"
    elif "consumerGroup" not in found and measures and measures != ["streamLength"]:
        yield f"{where}: parameter {measures[0]!r} needs a consumerGroup (else KEDA reads XLEN)"
    if kind == "redis-sentinel-streams" and "sentinelMaster" not in found:
        yield f"{where}: parameter 'sentinelMaster' is required for redis-sentinel-streams"
    if "enableTLS" in found and "tls" in found:
        yield f"{where}: 'enableTLS' (metadata) and 'tls' (TriggerAuthentication) together"
