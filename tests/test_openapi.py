"""openapi.yaml at the root is the app's schema, exactly."""

from __future__ import annotations

from pathlib import Path

import yaml

from judge_service.cli.openapi import schema_yaml

ROOT = Path(__file__).resolve().parent.parent


def test_openapi_yaml_equals_the_apps_schema() -> None:
    committed = yaml.safe_load((ROOT / "openapi.yaml").read_text(encoding="utf-8"))
    assert committed == yaml.safe_load(schema_yaml()), (
        "openapi.yaml is stale: run `judge-service openapi -o openapi.yaml`"
    )


def test_operation_ids_are_stable() -> None:
    schema = yaml.safe_load(schema_yaml())
    ids = {op["operationId"] for path in schema["paths"].values() for op in path.values()}
    assert {"judge_rollout", "judge_batch", "compute_credit", "healthz", "readyz"} <= ids
