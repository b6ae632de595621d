"""The deploy checks' modules for the chart tests, or the test module skipped without the
`deploy` extra (helm-python-sdk, kubernetes-validate), unless JUDGE_REQUIRE_DEPLOY=1 makes
that an error."""

from __future__ import annotations

import os

import pytest

try:
    import helm_python

    from deploy import cases, check, hardening, manifests
except ImportError as exc:
    if os.environ.get("JUDGE_REQUIRE_DEPLOY") == "1":
        raise
    pytest.skip(f"{exc.name} is missing (pip install -e '.[deploy]')", allow_module_level=True)

__all__ = ["cases", "check", "hardening", "helm_python", "manifests"]
