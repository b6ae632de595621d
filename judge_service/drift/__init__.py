"""The live drift audit: what each judge does while it serves, against what it did first.

`window` (counts and their divergence), `verdict` (ok / drifting / bad), `observe` (what a
judged rollout and a shadow check count), `canary` (canary runs), `store` (in-process or
Redis), `monitor` (one process's audit), `metrics`, `report` (``GET /v1/audit/drift``).
"""
