"""Where users see the drift audit (issue 40): ``GET /v1/audit/drift`` and its page over real
HTTP, per API key; ``client.drift()``; the Prometheus metrics; and the trainers' watch
logging the verdict and stopping the run on ``bad`` against a judge that went lazy; a
pinned baseline."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from judge_service_client.client import JudgeClient, NotFoundError
from judge_service_client.integrations.drift import DriftWatch, JudgeDriftError

from judge_service.api.app import create_app
from judge_service.config import Settings
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.conftest import LiveServer
from tests.harness.scripted import FakeProviderServer, anthropic_server
from tests.harness.scripted.degrade import Degrader, engine_settings

ALPHA, BETA = "alpha-secret-key-0001", "beta-secret-key-0002"
JUDGE = "anthropic:claude-test"


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeProviderServer]:
    with anthropic_server() as fake:
        yield fake


@pytest.fixture
def live(provider: FakeProviderServer, provider_keys: None) -> Iterator[str]:
    settings = Settings(
        **engine_settings(
            provider,
            api_keys=f"{ALPHA},{BETA}",  # CSV, as in the environment
            drift_window=40,
            drift_chunk=10,
            drift_shadow_rate=0.5,
        )
    )
    with LiveServer(create_app(settings)) as server:
        yield server.url


def _judge(client: JudgeClient, degrader: Degrader, first: int, count: int, tok: str) -> None:
    rollouts = [degrader.rollout(i, tok) for i in range(first, first + count)]
    for at in range(0, count, 10):
        client.judge_batch(rollouts[at : at + 10], {"judge": JUDGE, "use_cache": False})


def test_drift_over_http_per_key_with_page_metrics_and_a_stop(
    live: str,
    provider: FakeProviderServer,
    bpe: LoadedTokenizer,
    bpe_dir: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    degrader = Degrader(bpe, seed=3)
    degrader.install(provider)
    tok = str(bpe_dir)
    watch = DriftWatch(every=2, stop_on_bad=True)
    with JudgeClient(live, api_key=ALPHA) as alpha, JudgeClient(live, api_key=BETA) as beta:
        _judge(alpha, degrader, 0, 80, tok)
        report = alpha.drift()
        assert report.enabled and report.verdict == "ok"
        (judge,) = report.judges
        assert judge.judge == JUDGE and judge.window_judgments == 40
        assert judge.baseline_judgments == 40 and len(judge.points) == 8
        assert judge.shadow.agreement is not None and judge.shadow.agreement > 0.8
        assert watch.check(alpha, 1) is None  # not due
        assert watch.check(alpha, 2) == 0
        # another key's judges are its own: it has judged nothing
        assert beta.drift().judges == []

        degrader.mode = "lazy"
        _judge(alpha, degrader, 80, 60, tok)
        report = alpha.drift(points=3)
        assert report.verdict == "bad" and len(report.judges[0].points) == 3
        assert report.judges[0].reason.split(":")[0] in ("spans", "labels", "credit")
        with caplog.at_level(logging.WARNING), pytest.raises(JudgeDriftError, match="bad"):
            watch.check(alpha, 4)
        assert "is bad" in caplog.text
        assert DriftWatch(every=2).check(alpha, 4) == 2  # logged, not stopped

        page = httpx.get(
            f"{live}/v1/audit/drift/view", headers={"Authorization": f"Bearer {ALPHA}"}
        )
        assert page.status_code == 200
        assert "default-src 'none'" in page.headers["content-security-policy"]
        assert "<script" not in page.text and "style=" not in page.text
        assert JUDGE in page.text and "<polyline" in page.text and "v-bad" in page.text
        refused = httpx.get(
            f"{live}/v1/audit/drift",
            params={"points": 0},
            headers={"Authorization": f"Bearer {ALPHA}"},
        )
        assert refused.status_code == 422 and refused.json()["field"] == "query.points"
        assert httpx.get(f"{live}/v1/audit/drift").status_code == 401

        metrics = httpx.get(f"{live}/metrics").text
        verdicts = [
            line for line in metrics.splitlines() if line.startswith("judge_drift_verdict{")
        ]
        assert any(JUDGE in line and line.endswith(" 2.0") for line in verdicts), verdicts
        assert "judge_drift_score{" in metrics and "judge_shadow_agreement{" in metrics
        # the lazy judge accepted as the new normal: its window pinned as the baseline
        pinned = alpha.pin_drift_baseline(JUDGE)
        assert pinned.verdict == "ok" and pinned.judges[0].baseline_pinned_at is not None
        assert pinned.judges[0].baseline_judgments == 40
        _judge(alpha, degrader, 140, 20, tok)
        assert alpha.drift().verdict == "ok"
        with pytest.raises(NotFoundError) as missing:
            alpha.pin_drift_baseline("openai:other")
        assert missing.value.field == "judge"
        with pytest.raises(NotFoundError):
            beta.pin_drift_baseline(JUDGE)  # another key's series is not its own


def test_an_unreachable_audit_never_stops_training(caplog: pytest.LogCaptureFixture) -> None:
    nothing = JudgeClient("http://127.0.0.1:9", retry=None)  # nothing listens there
    with nothing as client, caplog.at_level(logging.WARNING):
        assert DriftWatch(every=1, stop_on_bad=True).check(client, 7) is None
    assert "unavailable at step 7" in caplog.text
