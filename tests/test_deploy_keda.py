"""KEDA as it reads the chart (deploy/keda_params.py, deploy/keda_redis.py): each mistake a
trigger can hold, made in a ScaledObject rendered from values, is reported naming the
trigger and the parameter; values KEDA cannot be given fail the render naming the value.

The two defects of the chart before this check: redis-sentinel-streams triggers with
``address`` (KEDA v2.15 and older read only ``addresses`` there), and a password in
redis.external.url that no TriggerAuthentication gave KEDA.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.deploy_support import cases, check, helm_python, manifests

Manifest = manifests.Manifest
Doc = dict[str, Any]
SENTINEL = "Sentinel with a Sentinel password in the URL, KEDA"
URL_PASSWORD = "external URL with the password in it, KEDA"
WAITING = "ScaledObject/judge-service-worker trigger waiting"


def _problems(label: str, change: Callable[[Doc], None], kind: str = "ScaledObject") -> list[str]:
    """check_queue's problems once `change` edits the one `kind` object rendered from the
    values of cases.CASES[label]; the unedited rendering must pass."""
    found = manifests.render(cases.CASES[label])
    assert list(check.check_queue(found)) == []
    (target,) = [m for m in found if m.kind == kind]
    doc = copy.deepcopy(target.doc)
    change(doc)
    return list(check.check_queue([Manifest(m.template, doc) if m is target else m for m in found]))


def _waiting(change: Callable[[Doc], None]) -> Callable[[Doc], None]:
    """Edit the metadata of the `waiting` trigger (lagCount) only."""

    def edit(doc: Doc) -> None:
        change(doc["spec"]["triggers"][0]["metadata"])

    return edit


def _rename(old: str, new: str) -> Callable[[Doc], None]:
    return lambda meta: meta.__setitem__(new, meta.pop(old))


def _assert_named(problems: list[str], *parts: str) -> None:
    assert any(all(p in problem for p in parts) for problem in problems), problems


def test_sentinel_trigger_with_address_is_undocumented() -> None:
    problems = _problems(SENTINEL, _waiting(_rename("addresses", "address")))
    _assert_named(problems, WAITING, "'address' is undocumented for redis-sentinel-streams")
    _assert_named(problems, "names it 'addresses'", "v2.15")
    # ...and the plain scaler's `addresses` the other way round.
    problems = _problems(URL_PASSWORD, _waiting(_rename("address", "addresses")))
    _assert_named(problems, WAITING, "'addresses' is undocumented for redis-streams")


def test_url_password_without_a_trigger_authentication() -> None:
    def drop_auth(doc: Doc) -> None:
        for trigger in doc["spec"]["triggers"]:
            del trigger["authenticationRef"]

    problems = _problems(URL_PASSWORD, drop_auth)
    _assert_named(problems, WAITING, "has a password, KEDA none", "'password'")
    _assert_named(problems, "trigger in-flight", "'password'")


def test_sentinel_password_missing_or_wrong() -> None:
    def drop(doc: Doc) -> None:
        doc["spec"]["secretTargetRef"] = [
            r for r in doc["spec"]["secretTargetRef"] if r["parameter"] != "sentinelPassword"
        ]

    problems = _problems(SENTINEL, drop, "TriggerAuthentication")
    _assert_named(problems, WAITING, "has a sentinelPassword, KEDA none")

    def swap(doc: Doc) -> None:
        for ref in doc["spec"]["secretTargetRef"]:
            ref["key"] = "redis-password"  # the primary's, for both

    problems = _problems(SENTINEL, swap, "TriggerAuthentication")
    _assert_named(problems, WAITING, "'sentinelPassword' is not the workers'")


def test_a_misspelt_trigger_authentication_parameter() -> None:
    def typo(doc: Doc) -> None:
        doc["spec"]["secretTargetRef"][0]["parameter"] = "passwd"

    problems = _problems(URL_PASSWORD, typo, "TriggerAuthentication")
    _assert_named(problems, WAITING, "passwd (TriggerAuthentication) is not a parameter")
    _assert_named(problems, WAITING, "has a password, KEDA none")


def test_the_cluster_scaler_takes_no_database() -> None:
    def cluster(doc: Doc) -> None:
        trigger = doc["spec"]["triggers"][0]
        trigger["type"] = "redis-cluster-streams"
        trigger["metadata"]["addresses"] = trigger["metadata"].pop("address")

    problems = _problems(URL_PASSWORD, cluster)
    _assert_named(problems, WAITING, "databaseIndex (metadata) is not a parameter")
    _assert_named(problems, WAITING, "type redis-cluster-streams, the workers' URL needs")


def test_password_from_another_secret_than_the_workers() -> None:
    label = "external URL, the password from a Secret, KEDA"

    def other(doc: Doc) -> None:
        doc["spec"]["secretTargetRef"][0]["name"] = "someone-else"

    _assert_named(_problems(label, other, "TriggerAuthentication"), WAITING, "'password'")


@pytest.mark.parametrize(
    ("label", "change", "complaint"),
    [
        (URL_PASSWORD, _rename("lagCount", "lagcount"), "lagcount (metadata) is not a parameter"),
        (URL_PASSWORD, _rename("stream", "streamName"), "'stream' is required"),
        (URL_PASSWORD, lambda m: m.pop("address"), "'address' (or 'host' and 'port')"),
        (URL_PASSWORD, lambda m: m.update(host="redis.example", port="6380"), "dials both"),
        (URL_PASSWORD, lambda m: m.update(pendingEntriesCount="8"), "lagCount and pending"),
        (URL_PASSWORD, lambda m: m.update(streamLength="8"), "lagCount and streamLength"),
        (URL_PASSWORD, lambda m: m.update(lagCount="8.0"), "'lagCount' is '8.0', not a positive"),
        (URL_PASSWORD, lambda m: m.update(lagCount="0"), "'lagCount' is '0', not a positive"),
        (URL_PASSWORD, lambda m: m.update(databaseIndex="03"), "'databaseIndex' is '03'"),
        (URL_PASSWORD, lambda m: m.update(enableTLS="yes"), "'enableTLS' is 'yes'"),
        (URL_PASSWORD, lambda m: m.update(password="pw"), "'password' is a secret in plaintext"),
        (URL_PASSWORD, lambda m: m.update(sentinelMaster="m"), "sentinelMaster (metadata) is not"),
        (URL_PASSWORD, lambda m: m.update(address="a:1,redis.example:6380"), "only the first"),
        (URL_PASSWORD, lambda m: m.update(databaseIndex="4"), "databaseIndex 4, the workers use"),
        (URL_PASSWORD, lambda m: m.update(enableTLS="true"), "TLS on (enableTLS), the workers'"),
        (URL_PASSWORD, lambda m: m.update(address="redis.example:6379"), "address ['redis.exa"),
        (SENTINEL, lambda m: m.update(sentinelPassword="spw"), "'sentinelPassword' is a secret"),
        (SENTINEL, lambda m: m.pop("sentinelMaster"), "'sentinelMaster' is required"),
        (SENTINEL, lambda m: m.update(sentinelMaster="other"), "sentinelMaster 'other'"),
    ],
)
def test_each_trigger_mistake_is_named(
    label: str, change: Callable[[Doc], None], complaint: str
) -> None:
    _assert_named(_problems(label, _waiting(change)), WAITING, complaint)


def test_a_trigger_of_the_wrong_topology() -> None:
    def plain(doc: Doc) -> None:
        doc["spec"]["triggers"][0]["type"] = "redis-streams"

    problems = _problems(SENTINEL, plain)
    _assert_named(problems, WAITING, "type redis-streams, the workers' URL needs redis-sentinel")
    _assert_named(problems, WAITING, "sentinelMaster (metadata) is not a parameter")


def test_a_password_from_the_workers_environment_is_accepted() -> None:
    # passwordFromEnv names a variable of the scaled Deployment's container: the one the
    # kubelet splices into JUDGE_REDIS_URL reads the same Secret.
    label = "external URL, the password from a Secret, KEDA"

    def from_env(doc: Doc) -> None:
        for trigger in doc["spec"]["triggers"]:
            del trigger["authenticationRef"]
            trigger["metadata"]["passwordFromEnv"] = "REDIS_PASSWORD"

    assert _problems(label, from_env) == []

    def wrong_env(doc: Doc) -> None:
        from_env(doc)
        doc["spec"]["triggers"][0]["metadata"]["passwordFromEnv"] = "JUDGE_API_KEYS"

    _assert_named(_problems(label, wrong_env), WAITING, "'password' is not the workers'")


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("redis://:p%40ss@redis.example:6379/0", "percent-encoded"),
        ("rediss+sentinel://:pw@s1:26379/judge-primary", "rediss+sentinel:// is TLS"),
        ("unix:///run/redis.sock", "unix socket"),
        ("redis://redis.example:6379/?db=2", "not from ?db="),
        ("redis://redis.example:6379/zero", 'database "zero" is not a number'),
    ],
)
def test_urls_keda_cannot_be_given_fail_the_render_naming_the_value(
    url: str, complaint: str
) -> None:
    with pytest.raises(helm_python.HelmError, match=r"redis\.external\.url") as caught:
        manifests.render(cases.external({"url": url}))
    assert complaint in str(caught.value)
    # Without KEDA the workers read such a URL themselves: nothing to refuse.
    manifests.render({**cases.external({"url": url}), "keda": {"enabled": False}})


def test_url_passwords_reach_keda_through_the_charts_secret_only() -> None:
    found = manifests.render(cases.CASES[SENTINEL])
    (auth,) = [m for m in found if m.kind == "TriggerAuthentication"]
    secrets = {m.name: m.doc.get("stringData", {}) for m in found if m.kind == "Secret"}
    refs = auth.doc["spec"]["secretTargetRef"]
    given = {r["parameter"]: secrets[r["name"]][r["key"]] for r in refs}
    assert given == {"password": "pw", "sentinelPassword": "spw"}
    for m in found:
        if m.kind != "Secret":
            assert "spw" not in str(m.doc), m.where()
