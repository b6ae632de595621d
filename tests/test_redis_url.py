"""JUDGE_REDIS_URL: plain URLs as redis-py reads them, and the Sentinel form this service reads."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from judge_service.config import Settings
from judge_service.errors import RedisUrlError, StoreUnavailable
from judge_service.store.redis_conn import RedisConnection
from judge_service.store.redis_url import (
    SentinelUrl,
    check_redis_url,
    parse_sentinel_url,
)


def test_the_sentinel_form() -> None:
    parsed = parse_sentinel_url(
        "redis+sentinel://user:p%40ss@s1:26380,s2,[::1]:26381/judge/3?sentinel_password=sp"
    )
    assert parsed == SentinelUrl(
        sentinels=(("s1", 26380), ("s2", 26379), ("::1", 26381)),
        service="judge",
        db=3,
        username="user",
        password="p@ss",
        ssl=False,
        sentinel_auth={"password": "sp"},
    )
    assert parse_sentinel_url("rediss+sentinel://:pw@h/svc").ssl
    only_password = parse_sentinel_url("redis+sentinel://:pw@h/svc")
    assert (only_password.username, only_password.password, only_password.db) == (None, "pw", 0)
    assert "pw" not in parse_sentinel_url("redis+sentinel://:pw@h:1/svc").redacted()


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+sentinel://h1,h2", "service name"),
        ("redis+sentinel://h1/svc/x", "database must be a number"),
        ("redis+sentinel://h1/svc/0/more", "/service or /service/db"),
        ("redis+sentinel://h1:99999/svc", "no valid port"),
        ("redis+sentinel://h1,,h2/svc", "comma-separated"),
        ("redis+sentinel://h1/svc?timeout=3", "unknown Sentinel URL option"),
        ("http://h1:6379", "redis://"),
    ],
)
def test_a_bad_url_says_which_part(url: str, says: str) -> None:
    with pytest.raises(RedisUrlError, match=says):
        check_redis_url(url)


def test_settings_reject_a_bad_url_without_printing_it() -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(redis_url="redis+sentinel://:hunter2@h1,h2")
    text = str(caught.value)
    assert "redis_url" in text and "service name" in text
    assert "hunter2" not in text


def test_wait_must_answer_before_the_socket_times_out() -> None:
    with pytest.raises(ValidationError, match="redis_wait_timeout_ms"):
        Settings(redis_wait_replicas=1, redis_wait_timeout_ms=3000, redis_timeout_s=2.0)
    assert Settings(redis_wait_replicas=1, redis_wait_timeout_ms=500).redis_wait_replicas == 1


def test_no_sentinel_answering_is_a_store_outage_not_a_crash() -> None:
    async def ping() -> None:
        # Port 1 on loopback refuses at once: no sentinel, so no primary to find.
        conn = RedisConnection("redis+sentinel://127.0.0.1:1/svc", "p", timeout_s=0.5)
        try:
            await conn.ping()
        finally:
            await conn.close()

    with pytest.raises(StoreUnavailable, match="redis unavailable"):
        asyncio.run(ping())
