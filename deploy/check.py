"""Render the Helm chart offline and validate everything it makes; exit 1 on any problem.

    .venv/bin/python deploy/check.py [--values FILE ...]

Without --values: every values combination the chart documents (deploy/cases.py: its own
Redis with and without a password, external URLs with the password in them or in a Secret,
TLS, Sentinel with a Sentinel password), then deploy/helm/values-production.yaml. For each:
`helm lint --strict`; every manifest against Kubernetes' schemas, the KEDA objects against
their CRDs' (deploy/manifests.py); then what no schema can see: names resolve (Secrets,
ConfigMaps, selectors, probe ports), the settings are ones the service has and accepts,
the worker's grace period covers its drain, and KEDA reads the stream and group the
workers really use, on the Redis they really use (type, addresses, Sentinel master,
database, TLS, credentials: deploy/keda_redis.py), with parameters KEDA v2.20 reads under
their documented names, in the forms it parses and no secret in plaintext metadata
(deploy/keda_params.py). Those facts are imported from judge_service, so a rename there
fails here.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import helm_python
import pydantic

# Run as a script (python deploy/check.py) its folder is on the path, not the checkout.
if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from deploy.cases import CASES, PRODUCTION_VALUES
from deploy.hardening import check_hardening, check_network
from deploy.keda_params import check_trigger, parameters
from deploy.keda_redis import PLACEHOLDER, Cred, check_connection, workers_connection
from deploy.manifests import (
    KUBERNETES_VERSION,
    Doc,
    Manifest,
    check_names,
    check_references,
    external_names,
    lint,
    load_values,
    merged_values,
    render,
    validate_manifest,
)
from judge_service.config import Settings
from judge_service.store.redis_conn import GROUP, Keys

STREAM_TRIGGERS = {"redis-streams", "redis-sentinel-streams", "redis-cluster-streams"}
# After its drain a stopping worker cancels what is left (waits up to 5 s) and hands it
# back to the queue; the grace period must cover that too, with room for a slow Redis.
SHUTDOWN_AFTER_DRAIN_S = 15.0


def drain_s(env: Mapping[str, str | None]) -> float:
    """The drain a stopping worker allows itself: its JUDGE_WORKER_DRAIN_S, else the default."""
    value = env.get("JUDGE_WORKER_DRAIN_S")
    if value is None:
        return float(Settings.model_fields["worker_drain_s"].default)
    return float(value)


DRAIN_S = drain_s({})
# JUDGE_REDIS_URL with the password spliced in by the kubelet (redis.external.passwordSecret).
PASSWORD_PLACEHOLDER = PLACEHOLDER


def container_env(container: Doc, manifests: list[Manifest]) -> dict[str, str | None]:
    """A container's variables as the kubelet would set them; None: a Secret's value the
    chart cannot see (an existing Secret), or a key it does not have."""
    maps = {x.name: x.doc.get("data") or {} for x in manifests if x.kind == "ConfigMap"}
    secrets = {x.name: x.doc.get("stringData") or {} for x in manifests if x.kind == "Secret"}
    env: dict[str, str | None] = {}
    for source in container.get("envFrom", []):
        env.update(maps.get(source.get("configMapRef", {}).get("name"), {}))
    for item in container.get("env", []):
        ref = item.get("valueFrom", {}).get("secretKeyRef")
        env[item["name"]] = secrets.get(ref["name"], {}).get(ref["key"]) if ref else item["value"]
    return env


def _workload(manifests: list[Manifest], command: str) -> tuple[Manifest, Doc] | None:
    for m in manifests:
        if m.kind == "Deployment":
            for container in m.doc["spec"]["template"]["spec"]["containers"]:
                if container.get("command", [])[:2] == ["judge-service", command]:
                    return m, container
    return None


@contextlib.contextmanager
def _only_environment(values: Mapping[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    try:
        for name in [n for n in os.environ if n.upper().startswith("JUDGE_")]:
            del os.environ[name]
        os.environ.update(values)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def check_settings(where: str, env: Mapping[str, str | None]) -> Iterator[str]:
    """Every JUDGE_* variable is a setting the service has, and together they load."""
    for name in sorted(env):
        if name.startswith("JUDGE_") and name[6:].lower() not in Settings.model_fields:
            yield f"{where}: {name} is no setting of judge_service (it would be ignored)"
    known = {
        name: value.replace(PASSWORD_PLACEHOLDER, "password")
        for name, value in env.items()
        if name.startswith("JUDGE_") and value is not None
    }
    with _only_environment(known):
        try:
            Settings()
        except pydantic.ValidationError as exc:
            yield f"{where}: the service refuses its settings: {exc}"


def check_queue(manifests: list[Manifest]) -> Iterator[str]:
    """The workers, their Redis and KEDA agree: stream, group, target, Redis, counts."""
    found = _workload(manifests, "worker")
    if found is None:
        yield "no Deployment runs `judge-service worker`"
        return
    worker, container = found
    env = container_env(container, manifests)
    api = _workload(manifests, "serve")
    for m, c in [found] + ([api] if api else []):
        yield from check_settings(m.where(), container_env(c, manifests))
    grace = worker.doc["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
    drain = drain_s(env)
    if grace < drain + SHUTDOWN_AFTER_DRAIN_S:
        yield (
            f"{worker.where()}: terminationGracePeriodSeconds {grace} does not cover the "
            f"worker's drain ({drain:g} s, JUDGE_WORKER_DRAIN_S) and hand-back "
            f"({SHUTDOWN_AFTER_DRAIN_S:g} s)"
        )
    scaled = [m for m in manifests if m.kind == "ScaledObject"]
    if not scaled:
        return
    prefix = env.get("JUDGE_REDIS_PREFIX") or Settings.model_fields["redis_prefix"].default
    stream, concurrency = Keys(str(prefix)).stream, env.get("JUDGE_WORKER_CONCURRENCY")
    creds = env_creds(container, manifests)
    url = creds.get("JUDGE_REDIS_URL", Cred()).value
    want = workers_connection(url, creds) if url is not None else None
    auths = trigger_authentications(manifests)
    for m in scaled:
        spec = m.doc["spec"]
        where = m.where()
        if spec["scaleTargetRef"].get("name") != worker.name:
            yield f"{where}: scales {spec['scaleTargetRef'].get('name')}, not {worker.name}"
        if "replicas" in worker.doc["spec"]:
            yield f"{worker.where()}: a fixed replicas fights the ScaledObject {m.name}"
        if spec.get("minReplicaCount", 0) > spec.get("maxReplicaCount", 100):
            yield f"{where}: minReplicaCount exceeds maxReplicaCount"  # the CRD's CEL rule
        triggers = [t for t in spec["triggers"] if t["type"] in STREAM_TRIGGERS]
        if not any("lagCount" in t["metadata"] for t in triggers):
            yield f"{where}: no lagCount trigger: a backlog would never add a worker"
        for trigger in triggers:
            meta, name = trigger["metadata"], f"{where} trigger {trigger.get('name', '')}"
            auth = auths.get((trigger.get("authenticationRef") or {}).get("name", ""), {})
            yield from check_trigger(name, trigger, {k: c.value for k, c in auth.items()})
            if meta.get("stream") != stream:
                yield f"{name}: stream {meta.get('stream')!r}, the workers read {stream!r}"
            if meta.get("consumerGroup") != GROUP:
                yield f"{name}: group {meta.get('consumerGroup')!r}, the workers are {GROUP!r}"
            pending = meta.get("pendingEntriesCount")
            if pending is not None and pending != concurrency:
                yield f"{name}: pendingEntriesCount {pending} != worker concurrency {concurrency}"
            if isinstance(want, str):
                yield f"{name}: KEDA cannot read the workers' Redis: {want}"
            elif want is not None:
                given, _ = parameters(trigger, {k: c.value for k, c in auth.items()})
                yield from check_connection(name, trigger["type"], given, want, creds, auth)


def env_creds(container: Doc, manifests: list[Manifest]) -> dict[str, Cred]:
    """A container's variables as credentials: the value where the chart knows it, and the
    Secret each one comes from."""
    values = container_env(container, manifests)
    found = {name: Cred(value=value) for name, value in values.items()}
    for item in container.get("env", []):
        ref = item.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            found[item["name"]] = Cred(values.get(item["name"]), (ref["name"], ref["key"]))
    return found


def trigger_authentications(manifests: list[Manifest]) -> dict[str, dict[str, Cred]]:
    """Each TriggerAuthentication's parameters, resolved against the chart's Secrets."""
    secrets = {x.name: x.doc.get("stringData") or {} for x in manifests if x.kind == "Secret"}
    found: dict[str, dict[str, Cred]] = {}
    for m in manifests:
        if m.kind == "TriggerAuthentication":
            found[m.name] = {
                ref["parameter"]: Cred(
                    secrets.get(ref["name"], {}).get(ref["key"]), (ref["name"], ref["key"])
                )
                for ref in m.doc["spec"].get("secretTargetRef", [])
            }
    return found


def check(values: Mapping[str, Any] | None) -> list[str]:
    """Every problem of the chart rendered with these values; empty when it is sound."""
    problems = lint(values)
    try:
        manifests = render(values)
    except helm_python.HelmError as exc:
        return [*problems, f"render: {exc}"]
    for manifest in manifests:
        problems += validate_manifest(manifest)
    problems += check_names(manifests)
    problems += check_references(manifests, external_names(merged_values(values)))
    problems += check_queue(manifests)
    merged = merged_values(values)
    problems += check_hardening(manifests)
    keda = merged["networkPolicy"]["kedaNamespace"] if merged["keda"]["enabled"] else None
    problems += check_network(manifests, keda)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--values", type=Path, action="append", help="a values file (repeat)")
    args = parser.parse_args(argv)
    cases: list[tuple[str, Doc | None]] = (
        [(str(path), load_values(path)) for path in args.values]
        if args.values
        else [*CASES.items(), (str(PRODUCTION_VALUES), load_values(PRODUCTION_VALUES))]
    )
    failed = False
    for label, values in cases:
        started = time.monotonic()
        problems = check(values)
        for problem in problems:
            print(f"FAIL {label}: {problem}", file=sys.stderr)
        failed = failed or bool(problems)
        count = "" if problems else f"{len(render(values))} manifests, "
        print(
            f"{'FAIL' if problems else 'ok'} {label}: {count}Kubernetes {KUBERNETES_VERSION}, "
            f"helm {helm_python.helm_sdk_version()} ({time.monotonic() - started:.1f} s)"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
