"""`judge_service.integrations.drift`, kept for its callers: a re-export of
`judge_service_client.integrations.drift`, defined once in the judge-service-client
distribution (client/ of this repository)."""

from judge_service_client.integrations.drift import DriftWatch, JudgeDriftError

__all__ = ["DriftWatch", "JudgeDriftError"]
