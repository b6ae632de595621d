"""`judge_service.client.calls`, kept for its callers: a re-export of
`judge_service_client.client.calls`, defined once in the
judge-service-client distribution (client/ of this repository). Monkeypatch there,
where the names are looked up.
"""

from judge_service_client.client.calls import (
    BaseClient,
    Call,
    Emit,
    Send,
    Sleep,
    Step,
    Steps,
    T,
    TransportT,
)

__all__ = [
    "BaseClient",
    "Call",
    "Emit",
    "Send",
    "Sleep",
    "Step",
    "Steps",
    "T",
    "TransportT",
]
