"""One LLM session reads a whole group: the real `anthropic` and `openai` SDKs talk HTTP to
scripted provider servers on loopback.

The session shows each rollout once with ⟦r.n⟧ markers (a copy not at all, a prefix two
rollouts share once), its tools take a rollout, each span goes to its own rollout's
validation (a span in a shared prefix to every holder), contrasts are checked against the
sibling they cite, the divergence points reach the judge as hints and stand against its
word unless it brings a correct sibling making the same step, and the whole group costs
one session, which the cache then saves.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from judge_service.group.judge import judge_group
from judge_service.judges.llm.ratelimit import reset_shared_limiters
from judge_service.pipeline import Engine
from judge_service.schemas import Options, Result, Rollout
from judge_service.store.memory import MemoryStore
from judge_service.trace import Trace
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.harness.scripted import FakeProviderServer, Fault, Reply, submit
from tests.harness.scripted.harness import llm_settings
from tests.harness.scripted.script import Call
from tests.test_group_route import FALSE_AT_3, RIGHT, SHARED
from tests.test_group_view import span_at, traced

MODELS = {"anthropic": "anthropic:claude-test", "openai": "openai:gpt-test"}
# Right, sharing RIGHT's first five lines token for token, then checking its result.
CHECKED = [*RIGHT[:5], "Check: 408 / 24 = 17.", "\\boxed{408}"]
# Wrong by a misreading (no arithmetic: the checker cannot call it false); a correct
# sibling (ALSO_READ) makes the same misreading and recovers.
MISREAD = [*SHARED[:2], "Read the problem as a sum instead.", "So the answer is \\boxed{41}."]
ALSO_READ = [
    SHARED[0],
    "Let me think.",
    "Read the problem as a sum instead.",
    "No, it is a product: 17 × 24 = 408.",
    "\\boxed{408}",
]


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    reset_shared_limiters()
    yield
    reset_shared_limiters()


def rollout(
    bpe: LoadedTokenizer, bpe_dir: Path, rid: str, lines: list[str], reward: float, script: str
) -> Rollout:
    return Rollout(
        id=rid,
        group_id="g",
        problem=f"What is 17 × 24? SCRIPT:{script}",
        response_token_ids=bpe.hf.encode("\n".join(lines), add_special_tokens=False),
        tokenizer=str(bpe_dir),
        reward=reward,
        reference_answer="408",
    )


def at(
    bpe: LoadedTokenizer, lines: list[str], phrase: str, label: str, **extra: Any
) -> dict[str, Any]:
    return span_at(traced(bpe, "\n".join(lines)), phrase, label, **extra)


def tokens(trace: Trace, phrase: str) -> tuple[int, int]:
    begin = trace.text.index(phrase)
    return trace.tokens_for_chars(begin, begin + len(phrase))


def cite(
    bpe: LoadedTokenizer, lines: list[str], rollout: int, phrase: str, quote: str
) -> dict[str, Any]:
    start, end = tokens(traced(bpe, "\n".join(lines)), phrase)
    return {"rollout": rollout, "start": start, "end": end, "quote": quote}


def sent_text(body: dict[str, Any]) -> str:
    """Every string of a request body, joined (the context, tool results, ...)."""
    out: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(body.get("messages", []))
    return "\n".join(out)


def credit(result: Result) -> np.ndarray:
    assert result.credit is not None
    return np.asarray(result.credit, np.float64)


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_one_session_reads_the_group_and_its_spans_land_on_their_rollouts(
    kind: str, servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer, bpe_dir: Path
) -> None:
    server = servers[kind]
    key = f"group-{kind}"
    group = [
        rollout(bpe, bpe_dir, "right", RIGHT, 1.0, key),
        rollout(bpe, bpe_dir, "false", FALSE_AT_3, 0.0, key),
        rollout(bpe, bpe_dir, "checked", CHECKED, 1.0, key),
        rollout(bpe, bpe_dir, "copy", RIGHT, 1.0, key),
    ]
    contrast = cite(bpe, RIGHT, 0, "17 × 4 = 68.", "17 × 4 = 68")
    wrong = {"rollout": 1, **at(bpe, FALSE_AT_3, "17 × 4 = 78.", "invalid", contrast=contrast)}
    good = {"rollout": 0, **at(bpe, RIGHT, "17 × 4 = 68.", "valid_progress")}
    forged = {  # quotes its own rollout's text as if rollout 0 wrote it
        "rollout": 1,
        **at(bpe, FALSE_AT_3, "340 + 78 = 418.", "unsupported"),
        "contrast": cite(bpe, RIGHT, 0, "340 + 68 = 408.", "340 + 78 = 418"),
    }
    outside = {
        "rollout": 1,
        **at(bpe, FALSE_AT_3, "So the answer is", "invalid"),
        "contrast": {"rollout": 7, "start": 0, "end": 3, "quote": "We need 17"},
    }
    server.book.add(
        key,
        Reply(
            (
                Call("view_tokens", {"rollout": 1, "start": 0, "end": 6}),
                Call("search_trace", {"pattern": "17 × 4"}),
            )
        ),
        submit([wrong, good, forged, outside]),
        submit([wrong, good]),
    )
    engine = Engine(
        llm_settings({"anthropic": server.url, "openai": server.url + "/v1"}), store=MemoryStore()
    )
    options = Options(judge=MODELS[kind], fallback="zero")

    response = await judge_group(engine, group, options)

    sent = server.requests_for(key)
    assert [r.turn for r in sent] == [0, 1, 2]  # one session of three turns for four rollouts
    context = sent_text(sent[0].body)
    assert all(f"## Rollout {r} (" in context for r in (0, 1, 2))
    assert "⟦0.0⟧We need" in context  # rollout 0 from its start; 1 and 2 after the shared part
    assert "## Rollout 3" not in context  # a copy is not shown
    # RIGHT's fifth line is held by rollouts 0, 2 and 3 and shown once.
    shown_text = context.split("<<<untrusted-group id=", 1)[1].split("<<<end untrusted-group", 1)[0]
    assert shown_text.count("340 + 68 = 408.") == 1
    assert "Tokens ⟦2.0⟧ to" in context and "the same as ⟦0.0⟧" in context
    assert "Rollout 1 (wrong) makes the same first 3 step(s) as correct rollout 0" in context
    tools = sent_text(sent[1].body)
    assert "rollout 1 tokens [0, 6)" in tools and "⟦1.5⟧" in tools
    assert "Rollout 0: " in tools and "Rollout 1: " in tools and "Rollout 2: " in tools
    repair = sent_text(sent[2].body)
    assert "[contrast_not_anchored]: rollout 1: contrast.quote '340 + 78 = 418'" in repair
    assert "contrast.rollout 7 is not a rollout of this group" in repair

    results = {r.id: r for r in response.results}
    assert {r.status for r in response.results} == {"ok"}
    assert [(s.label, s.start) for s in results["false"].spans] == [("invalid", wrong["start"])]
    cited = results["false"].spans[0].contrast  # the checked contrast, echoed
    assert cited is not None
    assert (cited.rollout, cited.start, cited.end) == (0, contrast["start"], contrast["end"])
    assert sorted(r.code for r in results["false"].rejected_spans) == [
        "contrast_not_anchored",
        "contrast_not_anchored",
    ]
    bad = credit(results["false"])
    assert (bad[wrong["start"] : wrong["end"]] < 0).all()
    assert (np.delete(bad, np.arange(wrong["start"], wrong["end"])) == 0).all()
    for rid in ("right", "checked", "copy"):  # the span in the shared prefix: every holder
        values = credit(results[rid])
        assert (values[good["start"] : good["end"]] > 0).all(), rid
        assert [s.label for s in results[rid].spans] == ["valid_progress"], rid
    assert results["right"].judge is not None and ".group-" in results["right"].judge.prompt_version
    shown = [results[r].judge for r in ("right", "false", "checked")]
    assert all(j is not None and j.name == MODELS[kind] and j.turns == 3 for j in shown)
    for kind_of in ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens"):
        parts = [getattr(j, kind_of) for j in shown]  # one session's usage, shared three ways
        assert max(parts) - min(parts) <= 1, kind_of

    again = await judge_group(engine, group, options)  # the same group: from the cache

    assert len(server.requests_for(key)) == 3
    assert [r.cache for r in again.results] == ["hit"] * 4
    assert [r.spans for r in again.results] == [r.spans for r in response.results]


@pytest.mark.parametrize(
    ("case", "cited", "stands"),
    [
        ("bare", None, False),  # no evidence: the point stands
        ("same-step", (2, ALSO_READ, "Read the problem as a sum instead."), True),
        ("other-step", (0, RIGHT, "17 × 20 = 340."), False),
    ],
)
async def test_a_divergence_hint_is_overruled_only_by_a_correct_sibling_making_the_step(
    case: str,
    cited: tuple[int, list[str], str] | None,
    stands: bool,
    servers: dict[str, FakeProviderServer],
    bpe: LoadedTokenizer,
    bpe_dir: Path,
) -> None:
    server = servers["anthropic"]
    key = f"overrule-{case}"
    group = [
        rollout(bpe, bpe_dir, "right", RIGHT, 1.0, key),
        rollout(bpe, bpe_dir, "misread", MISREAD, 0.0, key),
        rollout(bpe, bpe_dir, "also", ALSO_READ, 1.0, key),
    ]
    step = "Read the problem as a sum instead."
    extra = {} if cited is None else {"contrast": cite(bpe, cited[1], cited[0], cited[2], cited[2])}
    overrule = {"rollout": 1, **at(bpe, MISREAD, step, "valid_progress", **extra)}
    server.book.add(key, submit([overrule]))
    engine = Engine(llm_settings({"anthropic": server.url}))

    response = await judge_group(engine, group, Options(judge=MODELS["anthropic"]))

    context = sent_text(server.requests_for(key)[0].body)
    assert (
        f"then parts at ⟦1.{overrule['start']}⟧ to ⟦1.{overrule['end']}⟧: what follows it "
        "ends in the rollout's wrong final answer" in context
    )
    misread = response.results[1]
    assert misread.status == "ok" and not misread.rejected_spans
    values = credit(misread)[overrule["start"] : overrule["end"]]
    assert response.group.divergence[0].rollout == 1
    if stands:
        assert (values > 0).all() and [s.label for s in misread.spans] == ["valid_progress"]
        assert response.group.divergence[0].applied is False
    else:
        assert (values < 0).all() and [s.label for s in misread.spans] == ["invalid"]
        assert response.group.divergence[0].applied is True


async def test_a_failed_group_session_falls_back_rollout_by_rollout(
    servers: dict[str, FakeProviderServer], bpe: LoadedTokenizer, bpe_dir: Path
) -> None:
    server = servers["anthropic"]
    key = "group-fails"
    server.book.add(key, Fault(400, message="bad request"))
    group = [
        rollout(bpe, bpe_dir, "right", RIGHT, 1.0, key),
        rollout(bpe, bpe_dir, "false", FALSE_AT_3, 0.0, key),
        rollout(bpe, bpe_dir, "checked", CHECKED, 1.0, key),
    ]
    engine = Engine(llm_settings({"anthropic": server.url}))

    response = await judge_group(engine, group, Options(judge=MODELS["anthropic"]))

    assert len(server.requests_for(key)) == 1  # one session for the group, not three
    assert [r.status for r in response.results] == ["fallback"] * 3
    assert all(r.judge is not None and r.judge.name == "rules" for r in response.results)
    assert all(r.error and r.error.startswith("provider: ") for r in response.results)
    # The rules fallback still gets the divergence point onto the wrong rollout.
    point = response.group.divergence[0]
    assert credit(response.results[1])[point.start : point.end].sum() < 0
