"""The chart's manifests, offline: render, lint, validate against schemas, resolve names.

Nothing here knows judge_service: deploy/check.py adds what the service itself says.
Kubernetes' schemas are kubernetes-validate's (strict: an unknown field is an error, as
`kubectl apply --validate=strict` makes it); the KEDA objects' are their CRDs'
openAPIV3Schema in deploy/crds/ (KEDA v2.20.2), made strict the same way.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import helm_python
import jsonschema
import kubernetes_validate  # type: ignore[import-untyped, unused-ignore]
import yaml

DEPLOY = Path(__file__).resolve().parent
CHART = DEPLOY / "helm" / "judge-service"
CRDS = DEPLOY / "crds"
# The newest Kubernetes whose schemas kubernetes-validate 1.37 ships.
KUBERNETES_VERSION = "1.37.0"
RELEASE = "judge-service"
NAMESPACE = "judge"
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")

Doc = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Manifest:
    template: str  # e.g. judge-service/templates/worker.yaml: where an error points
    doc: Doc

    @property
    def kind(self) -> str:
        return str(self.doc.get("kind", ""))

    @property
    def name(self) -> str:
        return str(self.doc.get("metadata", {}).get("name", ""))

    def where(self) -> str:
        return f"{self.template} {self.kind}/{self.name}"


def load_values(path: Path) -> Doc:
    loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(loaded, dict):
        raise ValueError(f"{path}: not a mapping of values")
    return loaded


def render(values: Mapping[str, Any] | None = None) -> list[Manifest]:
    """The chart's manifests (hooks included, NOTES.txt not), as `helm template` makes them."""
    with helm_python.Chart.load(CHART) as chart:
        rendered = chart.render(dict(values or {}), name=RELEASE, namespace=NAMESPACE)
    return [
        Manifest(template, doc)
        for template, text in sorted(rendered.items())
        if template.endswith((".yaml", ".yml"))
        for doc in yaml.safe_load_all(text)
        if doc
    ]


def merged_values(values: Mapping[str, Any] | None) -> Doc:
    with helm_python.Chart.load(CHART) as chart:
        return chart.merge_values(dict(values or {}))


def lint(values: Mapping[str, Any] | None) -> list[str]:
    """`helm lint --strict`: warnings count as errors (severity 2 and up)."""
    report = helm_python.lint(
        CHART, dict(values or {}), strict=True, namespace=NAMESPACE,
        kube_version=f"v{KUBERNETES_VERSION}",
    )  # fmt: skip
    found = [f"{m['path']}: {m['error']}" for m in report["messages"] if m["severity"] >= 2]
    return found + [str(error) for error in report["errors"]]


def strict_schema(node: Any) -> Any:
    """An openAPIV3Schema as JSON Schema with the API server's strictness: objects with
    declared properties take no others, int-or-string and nullable spelled out."""
    if isinstance(node, list):
        return [strict_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: strict_schema(value) for key, value in node.items()}
    if out.pop("x-kubernetes-int-or-string", False):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"]
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@cache
def crd_validators() -> dict[tuple[str, str], jsonschema.Draft7Validator]:
    """(apiVersion, kind) -> a validator of every served version of deploy/crds/*.yaml."""
    found = {}
    for path in sorted(CRDS.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        spec = crd["spec"]
        for version in spec["versions"]:
            if version.get("served"):
                schema = strict_schema(version["schema"]["openAPIV3Schema"])
                key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
                found[key] = jsonschema.Draft7Validator(schema)
    return found


def validate_manifest(manifest: Manifest) -> list[str]:
    """Schema errors of one manifest: its CRD's when deploy/crds/ has it, else Kubernetes'."""
    doc, where = manifest.doc, manifest.where()
    crd = crd_validators().get((str(doc.get("apiVersion")), manifest.kind))
    if crd is not None:
        errors = [
            f"{where}: {'.'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
            for e in crd.iter_errors(doc)
        ]
        # The CRD says only "object" of metadata: Kubernetes' ObjectMeta, on a ConfigMap.
        shell = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": doc.get("metadata")}
        return errors + _kubernetes_errors(shell, where)
    return _kubernetes_errors(doc, where)


def _kubernetes_errors(doc: Doc, where: str) -> list[str]:
    try:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return [f"{where}: {'.'.join(map(str, exc.path)) or '(root)'}: {exc.message}"]
    except (kubernetes_validate.SchemaNotFoundError, kubernetes_validate.InvalidSchemaError) as e:
        return [f"{where}: no schema to validate it against: {e.message}"]
    return []


def check_names(manifests: list[Manifest]) -> Iterator[str]:
    for m in manifests:
        if len(m.name) > 253 or not DNS_SUBDOMAIN.match(m.name):
            yield f"{m.where()}: the name is not a DNS subdomain"
        if m.kind == "Service" and (len(m.name) > 63 or not DNS_LABEL.match(m.name)):
            yield f"{m.where()}: a Service's name must be a DNS label (63 characters at most)"


def external_names(values: Doc) -> set[str]:
    """Secrets the values say exist already: existingSecret, and every *Secret's name."""
    found: set[str] = set()
    stack: list[Any] = [values]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "existingSecret" and isinstance(value, str) and value:
                    found.add(value)
                elif key.endswith("Secret") and isinstance(value, dict) and value.get("name"):
                    found.add(str(value["name"]))
                stack.append(value)
    return found


def pod_spec(m: Manifest) -> Doc | None:
    if m.kind == "Pod":
        return dict(m.doc["spec"])
    if m.kind in {"Deployment", "StatefulSet", "DaemonSet", "Job"}:
        return dict(m.doc["spec"]["template"]["spec"])
    return None


def _template_labels(m: Manifest) -> dict[str, str]:
    return dict(m.doc["spec"]["template"]["metadata"].get("labels") or {})


def _matches(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def check_references(manifests: list[Manifest], external: set[str]) -> Iterator[str]:
    """What a schema cannot see: every name a manifest points at exists."""
    have = {(m.kind, m.name) for m in manifests}
    pods = [m for m in manifests if m.kind == "Deployment"]

    def known(kind: str, name: str) -> bool:
        return (kind, name) in have or (kind == "Secret" and name in external)

    for m in manifests:
        spec = pod_spec(m)
        if spec is None:
            continue
        account = spec.get("serviceAccountName", "default")
        if account != "default" and not known("ServiceAccount", account):
            yield f"{m.where()}: no ServiceAccount {account}"
        if m.kind == "Deployment":
            selector = m.doc["spec"]["selector"]["matchLabels"]
            if not _matches(selector, _template_labels(m)):
                yield f"{m.where()}: the selector does not select the pod template"
        for volume in spec.get("volumes", []):
            claim = volume.get("persistentVolumeClaim", {}).get("claimName")
            if claim and not known("PersistentVolumeClaim", claim):
                yield f"{m.where()}: no PersistentVolumeClaim {claim}"
        for container in spec["containers"]:
            refs = [("ConfigMap", e.get("configMapRef")) for e in container.get("envFrom", [])]
            refs += [("Secret", e.get("secretRef")) for e in container.get("envFrom", [])]
            for env in container.get("env", []):
                source = env.get("valueFrom", {})
                refs += [("Secret", source.get("secretKeyRef"))]
                refs += [("ConfigMap", source.get("configMapKeyRef"))]
            for kind, ref in refs:
                if ref and not ref.get("optional") and not known(kind, ref["name"]):
                    yield f"{m.where()}: {container['name']} reads the missing {kind} {ref['name']}"
            ports = {p.get("name") for p in container.get("ports", [])}
            for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                action = container.get(probe, {}).get("httpGet") or {}
                if isinstance(action.get("port"), str) and action["port"] not in ports:
                    yield f"{m.where()}: {probe} names no port of {container['name']}"
    for m in manifests:
        if m.kind in {"Service", "PodDisruptionBudget"}:
            selector = m.doc["spec"].get("selector", {})
            selector = selector.get("matchLabels", selector)
            chosen = [p for p in pods if _matches(selector, _template_labels(p))]
            if len(chosen) != 1:
                yield f"{m.where()}: selects {len(chosen)} Deployments, not one"
        if m.kind == "TriggerAuthentication":
            for ref in m.doc["spec"].get("secretTargetRef", []):
                if not known("Secret", ref["name"]):
                    yield f"{m.where()}: no Secret {ref['name']} for {ref['parameter']}"
        if m.kind == "ScaledObject":
            for trigger in m.doc["spec"]["triggers"]:
                auth = trigger.get("authenticationRef")
                if auth and not known(auth.get("kind", "TriggerAuthentication"), auth["name"]):
                    yield f"{m.where()}: no TriggerAuthentication {auth['name']}"
