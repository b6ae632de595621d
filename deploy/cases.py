"""Every values combination the chart documents (deploy/helm/README.md), rendered and
checked by deploy/check.py in CI: its own Redis with and without a password, an external
URL with the password in it or in a Secret, the whole URL in a Secret, TLS, Sentinel with a
Sentinel password, each with KEDA on; the defaults and the production values.

The Secrets named here are the user's (they exist before the install); the passwords are
placeholders.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

PRODUCTION_VALUES = Path(__file__).resolve().parent / "helm" / "values-production.yaml"
SENTINELS = "s1.redis:26379,s2.redis:26379,s3.redis:26379"

Values = dict[str, Any]


def external(values: Values, keda: Values | None = None) -> Values:
    """An external Redis (`values` for redis.external), KEDA on (`keda` for keda.redis)."""
    redis = {"internal": {"enabled": False}, "external": values}
    return {"redis": redis, "keda": {"enabled": True, **({"redis": keda} if keda else {})}}


KEDA_ON: Values = {"keda": {"enabled": True}}

# label -> values; None is the chart's defaults.
CASES: dict[str, Values | None] = {
    "chart defaults": None,
    "own Redis, KEDA": KEDA_ON,
    "own Redis with a password, KEDA": {**KEDA_ON, "redis": {"internal": {"password": "pw"}}},
    "external URL with the password in it, KEDA": external(
        {"url": "redis://:pw@redis.example:6380/3"}
    ),
    "external URL, the password from a Secret, KEDA": external(
        {
            "url": "redis://redis.example:6379/1",
            "passwordSecret": {"name": "judge-redis", "key": "redis-password"},
        }
    ),
    "external URL with a user and TLS without verification, KEDA": external(
        {"url": "rediss://judge:pw@redis.example:6380/0?ssl_cert_reqs=none"}
    ),
    "external TLS URL, KEDA": external({"url": "rediss://:pw@redis.example:6380/0"}),
    "external URL in a Secret, KEDA from keda.redis": external(
        {"existingSecret": "judge-redis-url", "existingSecretKey": "url"},
        {
            "addresses": "redis.example:6379",
            "enableTLS": True,
            "passwordSecret": {"name": "judge-redis", "key": "redis-password"},
        },
    ),
    "Sentinel with a Sentinel password in the URL, KEDA": external(
        {"url": f"redis+sentinel://:pw@{SENTINELS}/judge-primary/2?sentinel_password=spw"}
    ),
    "Sentinel, the password from a Secret, KEDA": external(
        {
            "url": f"redis+sentinel://{SENTINELS}/judge-primary",
            "passwordSecret": {"name": "judge-redis", "key": "redis-password"},
        }
    ),
    "Sentinel URL in a Secret, KEDA from keda.redis with a Sentinel password": external(
        {"existingSecret": "judge-redis-url"},
        {
            "addresses": SENTINELS,
            "sentinelMaster": "judge-primary",
            "databaseIndex": 2,
            "passwordSecret": {"name": "judge-redis", "key": "redis-password"},
            "sentinelPasswordSecret": {"name": "judge-redis", "key": "sentinel-password"},
        },
    ),
}
