"""The collector's pauses around the rules judge's allocation-heavy phases (collector.py):
off while any phase runs in any thread, back to what it was once the last one ends."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from judge_service.collector import collector_paused
from judge_service.judges.rules import rules_judge


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_paused_inside_and_on_again_after() -> None:
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer phase still runs
    assert gc.isenabled()


def test_an_error_inside_still_resumes() -> None:
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("the phase failed")
    assert gc.isenabled()


def test_left_off_when_it_was_off() -> None:
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


def test_overlapping_phases_in_two_threads() -> None:
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with collector_paused():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with collector_paused():
            second_in.set()
            first_out.wait(5)
            seen.append(gc.isenabled())  # the first ended: this one still holds it off

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == [False]
    assert gc.isenabled()


def test_the_rules_judge_reads_with_the_collector_paused(monkeypatch: pytest.MonkeyPatch) -> None:
    from judge_service.judges.base import JudgeRequest
    from judge_service.labels import DEFAULT_LABEL_SCORES
    from judge_service.spans import SpanLimits
    from judge_service.trace import TokenizerCache
    from tests.harness.tokenizers import synthetic_trace

    states: list[bool] = []
    real = rules_judge.read_trace

    def spy(request: JudgeRequest) -> object:
        states.append(gc.isenabled())
        return real(request)

    monkeypatch.setattr(rules_judge, "read_trace", spy)
    directory, ids = synthetic_trace(256)
    trace = TokenizerCache().get(str(directory)).decode(ids)
    request = JudgeRequest(
        rollout_id="r",
        trace=trace,
        problem="p",
        final_answer=None,
        reward=None,
        reference_answer=None,
        reference_solution=None,
        label_scores=dict(DEFAULT_LABEL_SCORES),
    )
    rules_judge.judge_spans(request, SpanLimits())
    assert states == [False]
    assert gc.isenabled()
