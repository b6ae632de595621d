"""The chart's isolation, rendered from values and checked (deploy/hardening.py): pods
non-root under RuntimeDefault seccomp, containers on a read-only root with their writable
paths as emptyDirs and every capability dropped, and NetworkPolicies that open the API's
port, no worker port, and the chart's Redis to the chart's own pods (and KEDA) only. Each
weakening, made through values or in a rendered manifest, is reported naming the object.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.deploy_support import check, hardening, manifests

Manifest = manifests.Manifest
Doc = dict[str, Any]
KEDA = {"keda": {"enabled": True}}


def _deployment(found: list[Manifest], component: str) -> Manifest:
    (m,) = [
        m
        for m in found
        if m.kind == "Deployment"
        and m.doc["metadata"]["labels"]["app.kubernetes.io/component"] == component
    ]
    return m


def test_api_and_workers_run_read_only_with_tmp_and_cache_as_empty_dirs() -> None:
    found = manifests.render(None)
    for component in ("api", "worker"):
        spec = _deployment(found, component).doc["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        ctx = container["securityContext"]
        assert ctx["readOnlyRootFilesystem"] is True and ctx["allowPrivilegeEscalation"] is False
        assert ctx["capabilities"] == {"drop": ["ALL"], "add": ["SYS_ADMIN"]}
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        volumes = {v["name"]: v for v in spec["volumes"]}
        mounts = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}
        assert set(mounts) == {"/tmp", "/home/judge/.cache"}
        assert all("emptyDir" in v for v in mounts.values())
    assert list(hardening.check_hardening(found)) == []
    # Without the sandbox's capability nothing is added at all.
    found = manifests.render({"sandbox": {"capSysAdmin": False}})
    ctx = _deployment(found, "worker").doc["spec"]["template"]["spec"]["containers"][0]
    assert ctx["securityContext"]["capabilities"] == {"drop": ["ALL"]}


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"securityContext": {"readOnlyRootFilesystem": False}}, "readOnlyRootFilesystem is not"),
        ({"securityContext": {"allowPrivilegeEscalation": True}}, "allowPrivilegeEscalation"),
        ({"securityContext": {"privileged": True}}, "container worker: privileged"),
        ({"podSecurityContext": {"seccompProfile": {"type": "Unconfined"}}}, "'Unconfined'"),
        ({"podSecurityContext": {"runAsNonRoot": False}}, "runAsNonRoot is not true"),
        ({"writablePaths": {"tmp": None}}, "/tmp is no emptyDir on its read-only root"),
    ],
)
def test_weakened_values_fail_the_check(values: Doc, complaint: str) -> None:
    problems = check.check(values)
    assert any(complaint in p and "judge-service" in p for p in problems), problems


def test_an_added_capability_fails_the_check() -> None:
    found = manifests.render(None)
    worker = _deployment(found, "worker")
    doc = copy.deepcopy(worker.doc)
    doc["spec"]["template"]["spec"]["containers"][0]["securityContext"]["capabilities"] = {
        "add": ["NET_ADMIN"]
    }
    problems = list(hardening.check_hardening([Manifest(worker.template, doc)]))
    assert any("worker: capabilities.drop lacks ALL" in p for p in problems), problems
    assert any("capabilities.add ['NET_ADMIN']" in p for p in problems), problems


def test_network_policies_open_the_api_close_the_workers_and_fence_redis() -> None:
    found = manifests.render(KEDA)
    policies = {m.name: m.doc["spec"] for m in found if m.kind == "NetworkPolicy"}
    assert set(policies) == {"judge-service-api", "judge-service-worker", "judge-service-redis"}
    assert policies["judge-service-api"]["ingress"] == [
        {"ports": [{"port": "http", "protocol": "TCP"}]}
    ]
    assert policies["judge-service-worker"]["ingress"] == []
    (redis,) = policies["judge-service-redis"]["ingress"]
    peers = [p.get("podSelector", p.get("namespaceSelector"))["matchLabels"] for p in redis["from"]]
    assert [p.get("app.kubernetes.io/component") for p in peers] == ["api", "worker", None]
    assert peers[2] == {"kubernetes.io/metadata.name": "keda"}
    assert list(hardening.check_network(found, "keda")) == []
    # Without KEDA its namespace has no business with Redis.
    plain = manifests.render(None)
    assert not any("keda" in str(m.doc) for m in plain if m.kind == "NetworkPolicy")
    assert list(hardening.check_network(found, None))  # the KEDA peer is now a stranger


def _edited(component: str, change: Callable[[Doc], None]) -> list[str]:
    found = manifests.render(KEDA)
    (policy,) = [
        m
        for m in found
        if m.kind == "NetworkPolicy"
        and m.doc["metadata"]["labels"]["app.kubernetes.io/component"] == component
    ]
    doc = copy.deepcopy(policy.doc)
    change(doc["spec"])
    edited = [Manifest(m.template, doc) if m is policy else m for m in found]
    return list(hardening.check_network(edited, "keda"))


@pytest.mark.parametrize(
    ("component", "change", "complaint"),
    [
        ("worker", lambda s: s.update(ingress=[{}]), "worker): the workers' metrics port is open"),
        (
            "worker",
            lambda s: s.update(
                ingress=[{"ports": [{"port": 9100}], "from": [{"podSelector": {}}]}]
            ),
            "",
        ),
        (
            "worker",
            lambda s: s.update(ingress=[{"ports": [{"port": 8000}]}]),
            "take connections on",
        ),
        ("api", lambda s: s.update(ingress=[{"ports": [{"port": 9000}]}]), "the API's port 8000"),
        ("api", lambda s: s.update(policyTypes=["Egress"]), "0 ingress NetworkPolicies"),
        ("redis", lambda s: s["ingress"][0].pop("from"), "Redis is open to anyone"),
        (
            "redis",
            lambda s: s["ingress"][0]["from"].append({"namespaceSelector": {}}),
            "namespaces {}",
        ),
        ("redis", lambda s: s["ingress"][0]["from"].append({"podSelector": {}}), "open to pods"),
        (
            "redis",
            lambda s: s["ingress"][0]["from"].pop(1),
            "['judge-service-worker'] cannot reach",
        ),
    ],
)
def test_each_network_weakening_is_named(
    component: str, change: Callable[[Doc], None], complaint: str
) -> None:
    problems = _edited(component, change)
    if complaint:
        assert any(complaint in p and "judge-service" in p for p in problems), problems
    else:  # metrics to named peers only: allowed
        assert problems == []


def test_metrics_and_api_peers_from_values() -> None:
    peers = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    values = {"networkPolicy": {"metricsFrom": peers, "apiFrom": peers}}
    found = manifests.render(values)
    policies = {m.name: m.doc["spec"] for m in found if m.kind == "NetworkPolicy"}
    assert policies["judge-service-worker"]["ingress"][0]["from"] == peers
    assert policies["judge-service-api"]["ingress"][0]["from"] == peers
    assert check.check(values) == []
    assert not [m for m in manifests.render({"networkPolicy": {"enabled": False}})
                if m.kind == "NetworkPolicy"]  # fmt: skip
