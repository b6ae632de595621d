"""What the chart promises about isolation, checked on the rendered manifests: every pod
non-root under the RuntimeDefault seccomp profile, every container on a read-only root
with no privilege escalation and all capabilities dropped (SYS_ADMIN the one addition, for
the sandbox's user namespace), its writable paths emptyDirs; and the NetworkPolicies: the
API reachable on its port, the workers on none, the chart's Redis from the chart's pods
(and KEDA's operator) only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from deploy.manifests import Doc, Manifest, pod_spec

# The one capability the chart may add: the sandbox's user namespace needs it in the
# bounding set under the default seccomp profile (values.yaml, sandbox.capSysAdmin).
ALLOWED_ADD = {"SYS_ADMIN"}
WRITABLE = "/tmp"  # the service's TMPDIR: an emptyDir wherever the root is read-only


def check_hardening(manifests: list[Manifest]) -> Iterator[str]:
    for m in manifests:
        spec = pod_spec(m)
        if spec is None:
            continue
        pod = spec.get("securityContext") or {}
        if pod.get("runAsNonRoot") is not True:
            yield f"{m.where()}: runAsNonRoot is not true"
        emptydirs = {v["name"] for v in spec.get("volumes", []) if "emptyDir" in v}
        for c in spec["containers"]:
            yield from _container(m, pod, c, emptydirs)


def _container(m: Manifest, pod: Doc, c: Doc, emptydirs: set[str]) -> Iterator[str]:
    where = f"{m.where()} container {c['name']}"
    ctx = c.get("securityContext") or {}
    seccomp = ctx.get("seccompProfile") or pod.get("seccompProfile") or {}
    if seccomp.get("type") != "RuntimeDefault":
        yield f"{where}: seccompProfile is {seccomp.get('type')!r}, not RuntimeDefault"
    if ctx.get("readOnlyRootFilesystem") is not True:
        yield f"{where}: readOnlyRootFilesystem is not true"
    if ctx.get("allowPrivilegeEscalation") is not False:
        yield f"{where}: allowPrivilegeEscalation is not false"
    if ctx.get("privileged"):
        yield f"{where}: privileged"
    caps = ctx.get("capabilities") or {}
    if "ALL" not in caps.get("drop", []):
        yield f"{where}: capabilities.drop lacks ALL"
    extra = set(caps.get("add", [])) - ALLOWED_ADD
    if extra:
        yield f"{where}: capabilities.add {sorted(extra)}"
    mounts = {v["mountPath"]: v["name"] for v in c.get("volumeMounts", [])}
    if (c.get("command") or [""])[0] == "judge-service" and mounts.get(WRITABLE) not in emptydirs:
        yield f"{where}: {WRITABLE} is no emptyDir on its read-only root"


def _selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def _ports(container: Doc) -> dict[str | int, int]:
    """A container's ports by name and by number -> number."""
    found: dict[str | int, int] = {}
    for p in container.get("ports", []):
        found[p["containerPort"]] = p["containerPort"]
        if "name" in p:
            found[p["name"]] = p["containerPort"]
    return found


def check_network(manifests: list[Manifest], keda_namespace: str | None) -> Iterator[str]:
    """With NetworkPolicies rendered: each Deployment has one; the API's opens its port,
    the workers' nothing but metrics to named peers, Redis's only the chart's API and
    worker pods (and KEDA's namespace, `keda_namespace`, when KEDA scales)."""
    policies = [m for m in manifests if m.kind == "NetworkPolicy"]
    if not policies:
        return
    deployments = [m for m in manifests if m.kind == "Deployment"]
    labels = {d.name: d.doc["spec"]["template"]["metadata"]["labels"] for d in deployments}
    for d in deployments:
        mine = [
            p
            for p in policies
            if _selects(p.doc["spec"]["podSelector"], labels[d.name])
            and "Ingress" in p.doc["spec"].get("policyTypes", [])
        ]
        if len(mine) != 1:
            yield f"{d.where()}: {len(mine)} ingress NetworkPolicies select it, not one"
            continue
        rules = mine[0].doc["spec"].get("ingress", [])
        container = d.doc["spec"]["template"]["spec"]["containers"][0]
        ports = _ports(container)
        allowed = {ports.get(p.get("port"), -1) for r in rules for p in r.get("ports", [])}
        component = labels[d.name].get("app.kubernetes.io/component")
        where = f"{mine[0].where()} ({component})"
        if component == "api" and ports.get("http") not in allowed:
            yield f"{where}: the API's port {ports.get('http')} is not open"
        if component == "worker" and allowed - {ports.get("metrics")}:
            yield f"{where}: the workers take connections on {sorted(allowed)}"
        if component == "worker" and any(not r.get("from") for r in rules):
            yield f"{where}: the workers' metrics port is open to anyone"
        if component == "redis":
            yield from _redis_peers(where, rules, deployments, labels, keda_namespace)


def _redis_peers(
    where: str,
    rules: list[Doc],
    deployments: list[Manifest],
    labels: Mapping[str, Mapping[str, str]],
    keda_namespace: str | None,
) -> Iterator[str]:
    peers = [peer for r in rules for peer in (r.get("from") or [None])]
    clients = {
        d.name
        for d in deployments
        if labels[d.name].get("app.kubernetes.io/component") in {"api", "worker"}
    }
    reached: set[str] = set()
    for peer in peers:
        if peer is None:
            yield f"{where}: Redis is open to anyone"
        elif "namespaceSelector" in peer:
            namespace = peer["namespaceSelector"].get("matchLabels", {})
            if namespace != {"kubernetes.io/metadata.name": keda_namespace}:
                yield f"{where}: Redis is open to the namespaces {namespace}"
        elif "podSelector" in peer:
            chosen = {d.name for d in deployments if _selects(peer["podSelector"], labels[d.name])}
            if not chosen or chosen - clients:
                yield f"{where}: Redis is open to pods {sorted(chosen) or 'outside the chart'}"
            reached |= chosen
        else:
            yield f"{where}: Redis is open to {peer}"
    if clients - reached:
        yield f"{where}: {sorted(clients - reached)} cannot reach Redis"
