"""Bearer-token auth and the per-key request limit.

With ``JUDGE_API_KEYS`` unset the API is open (a warning at start-up) and every
caller is the one tenant ``open``. With keys, each request needs
``Authorization: Bearer <key>``; the key is compared with every configured key
in constant time (both sides hashed first, so lengths leak nothing either, and
no early exit). The tenant is a hash of the key: jobs and judgments are stored
under it, so a key sees only what it created, and a raw key is never written
anywhere.

``JUDGE_API_RATE_LIMIT_RPM`` caps requests per key with a token bucket (in Redis
when configured, so all API replicas share it; in-process otherwise, and as
the fallback while Redis is down). Over the limit: 429 with ``retry-after``.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from judge_service.buckets import LocalBuckets, burst_capacity
from judge_service.config import Settings
from judge_service.errors import AuthError, StoreUnavailable, TooManyRequests
from judge_service.schemas import ErrorBody
from judge_service.store import Store

OPEN_TENANT = "open"

bearer = HTTPBearer(auto_error=False, description="One of the server's JUDGE_API_KEYS.")

AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "Missing or unknown API key."},
    429: {"model": ErrorBody, "description": "Over the per-key request limit; see retry-after."},
}


def tenant_of(key: str) -> str:
    return "k" + hashlib.sha256(key.encode()).hexdigest()[:24]


def matching_key(supplied: str, keys: list[str]) -> str | None:
    """The configured key equal to `supplied`, compared in constant time."""
    digest = hashlib.sha256(supplied.encode()).digest()
    found = None
    for key in keys:  # no early exit: the time taken does not depend on which key matched
        if hmac.compare_digest(digest, hashlib.sha256(key.encode()).digest()):
            found = key
    return found


class RequestLimiter:
    """Per-tenant token bucket: the store's (shared) one, or this process's while it is down."""

    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.rpm = settings.api_rate_limit_rpm
        rate = (self.rpm or 0.0) / 60.0
        self.rate = rate
        self.capacity = float(settings.api_rate_limit_burst or burst_capacity(rate))
        self._local = LocalBuckets()

    async def check(self, tenant: str) -> None:
        if self.rpm is None:
            return
        bucket = f"api:{tenant}"
        try:
            wait = await self.store.take_tokens(bucket, self.rate, self.capacity)
        except StoreUnavailable:
            wait = self._local.take_now(bucket, [("requests", self.rate, self.capacity, 1.0)])
        if wait > 0:
            raise TooManyRequests(wait, self.rpm)


async def authenticate(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> str:
    """The caller's tenant; raises AuthError (401) or TooManyRequests (429)."""
    settings: Settings = request.app.state.settings
    tenant = OPEN_TENANT
    if settings.api_keys:
        if credentials is None or not credentials.credentials:
            raise AuthError("missing bearer token: send 'Authorization: Bearer <API key>'")
        key = matching_key(credentials.credentials, settings.api_keys)
        if key is None:
            raise AuthError("invalid API key")
        tenant = tenant_of(key)
    limiter: RequestLimiter = request.app.state.request_limiter
    await limiter.check(tenant)
    request.state.tenant = tenant  # for `deps.get_engine`, which runs after
    return tenant


TenantDep = Annotated[str, Depends(authenticate)]


def install_auth_handlers(app: FastAPI) -> None:
    @app.exception_handler(AuthError)
    async def _unauthorized(_: Request, exc: AuthError) -> JSONResponse:
        return JSONResponse(
            status_code=401,
            content={"detail": exc.message, "field": "authorization"},
            headers={"www-authenticate": "Bearer"},
        )

    @app.exception_handler(TooManyRequests)
    async def _too_many(_: Request, exc: TooManyRequests) -> JSONResponse:
        seconds = max(1, math.ceil(exc.retry_after_s))
        return JSONResponse(
            status_code=429,
            content={
                "detail": f"rate limit: {exc.rpm:g} requests per minute per API key "
                f"(JUDGE_API_RATE_LIMIT_RPM); retry after {seconds} s",
                "field": None,
            },
            headers={"retry-after": str(seconds)},
        )

    @app.exception_handler(StoreUnavailable)
    async def _store_down(_: Request, exc: StoreUnavailable) -> JSONResponse:
        return JSONResponse(
            status_code=503,
            content={"detail": f"store unavailable, try again shortly: {exc}", "field": None},
            headers={"retry-after": "2"},
        )
