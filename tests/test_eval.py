"""``judge-service eval`` end to end (issue 11): the rules judge on the shipped examples
(REPORT.json consistent with its records), bad input named before anything is judged, a
failed record counted wrong, and an LLM judge against the scripted OpenAI server (fallbacks,
cost, latency, the pre-flight). The scoring itself: tests/test_eval_scoring.py."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from judge_service.cli.main import main
from judge_service.evaluation.segment import segment_steps
from judge_service.trace.tokenizer import LoadedTokenizer, TokenizerCache
from tests.conftest import EXAMPLES
from tests.harness.scripted import FakeProviderServer, Fault, Reply, openai_server, submit

# --- the command --------------------------------------------------------------------------


def _eval(*args: str) -> int:
    return main(["eval", *args, "--no-progress"])


def _report(path: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return report


def _check_consistent(report: dict[str, Any]) -> None:
    """The headline figures are what the per-record lines say."""
    records = report["records"]
    statuses = {s: sum(r["status"] == s for r in records) for s in ("ok", "fallback", "failed")}
    assert report["statuses"] == statuses
    assert report["fallback_rate"] == pytest.approx(statuses["fallback"] / len(records))
    assert {f["id"] for f in report["failed"]} == {
        r["id"] for r in records if r["status"] == "failed"
    }
    pb = [r for r in records if r["kind"] == "processbench"]
    if pb:
        err = [r for r in pb if r["label"] != -1]
        cor = [r for r in pb if r["label"] == -1]
        for r in pb:
            assert r["correct"] == (r["predicted"] == r["label"])
            assert (r["predicted"] is None) == (r["status"] == "failed")
        acc_error = sum(r["correct"] for r in err) / len(err)
        acc_correct = sum(r["correct"] for r in cor) / len(cor)
        scores = report["processbench"]
        assert scores["acc_error"] == pytest.approx(acc_error)
        assert scores["acc_correct"] == pytest.approx(acc_correct)
        assert scores["f1"] == pytest.approx(
            2 * acc_error * acc_correct / (acc_error + acc_correct)
        )
    judged = [r for r in records if r["status"] != "failed"]
    assert report["latency_ms"]["n"] == len(judged)
    if judged:
        assert report["latency_ms"]["p50"] <= report["latency_ms"]["p95"]
    assert report["rejections"]["accepted"] == sum(r["accepted_spans"] for r in records)


def test_rules_judge_on_the_shipped_processbench_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(EXAMPLES.parent)
    out = tmp_path / "report.json"
    code = _eval(
        "examples/processbench.jsonl", "--judge", "rules", "--tokenizer", "examples/tokenizer",
        "-o", str(out),
    )  # fmt: skip
    assert code == 0
    report = _report(out)
    assert set(report) >= {
        "processbench", "records", "rejections", "fallback_rate", "cost_usd", "latency_ms",
    }  # fmt: skip
    assert report["spans"] is None  # no gold-span record in this file
    _check_consistent(report)
    counts = report["processbench"]["counts"]
    assert counts["records"] == 20 and counts["erroneous"] == 10 and counts["correct"] == 10
    by_id = {r["id"]: r for r in report["records"]}
    # a false arithmetic link: found, in its step
    assert by_id["pb-mul-slip"]["predicted"] == 1 and by_id["pb-average-slip"]["predicted"] == 2
    # a sign moved wrongly, with true arithmetic: the rules judge cannot see it
    assert by_id["pb-linear-sign"]["predicted"] == -1
    # a wrong method, then a slip: the slip's step is named, not the first wrong one
    assert by_id["pb-rectangle-method"]["predicted"] == 1
    assert report["cost_usd"] is None and report["fallback_rate"] == 0.0


def test_a_records_reference_solution_points_the_first_wrong_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Real ProcessBench GSM8K records (examples/real): first errors in what is computed,
    # with true arithmetic. The record's reference_solution is read as a correct sibling:
    # with it the first negative credit lands on the labelled step; without it
    # (--without-reference) the rules judge alone finds nothing there. Correct ones stay
    # clean either way.
    monkeypatch.chdir(EXAMPLES.parent)
    wanted = {"gsm8k-0", "gsm8k-1", "gsm8k-3", "gsm8k-4", "gsm8k-200", "gsm8k-201"}
    source = EXAMPLES / "real" / "processbench-gsm8k.jsonl"
    lines = [line for line in source.open(encoding="utf-8") if json.loads(line)["id"] in wanted]
    records = tmp_path / "records.jsonl"
    records.write_text("".join(lines), encoding="utf-8")
    reports = {}
    for name, extra in (("with", ()), ("without", ("--without-reference",))):
        out = tmp_path / f"{name}.json"
        code = _eval(str(records), "--judge", "rules", "--tokenizer", "examples/tokenizer",
                     "-o", str(out), *extra)  # fmt: skip
        assert code == 0
        reports[name] = {r["id"]: r for r in _report(out)["records"]}
        _check_consistent(_report(out))
    for rid, record in reports["with"].items():
        assert record["correct"], record  # the labelled step, or -1 for a correct one
        alone = reports["without"][rid]
        assert alone["predicted"] == -1
    assert {r["label"] for r in reports["with"].values()} != {-1}


def test_rules_judge_on_the_shipped_gold_spans_and_a_mixed_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(EXAMPLES.parent)
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(
        (EXAMPLES / "gold_spans.jsonl").read_text(encoding="utf-8")
        + (EXAMPLES / "processbench.jsonl").read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    out = tmp_path / "report.json"
    assert _eval(str(mixed), "--tokenizer", "examples/tokenizer", "-o", str(out)) == 0
    report = _report(out)
    _check_consistent(report)
    spans = report["spans"]
    assert spans["records"] == 8 and report["processbench"]["counts"]["records"] == 20
    assert {"invalid", "unsupported", "valid_progress"} <= set(spans["by_label"])
    gold = sum(r.get("gold_spans", 0) for r in report["records"])
    boundary = spans["boundary_error"]
    assert boundary["matched"] + boundary["unmatched"] == gold
    micro = spans["micro"]
    by_label = spans["by_label"].values()
    assert micro["gold_tokens"] == sum(v["gold_tokens"] for v in by_label)
    assert micro["true_positive_tokens"] == sum(v["true_positive_tokens"] for v in by_label)
    # the rules judge finds the propagated product's false link exactly where the gold is
    invalid = spans["by_label"]["invalid"]
    assert 0 < invalid["true_positive_tokens"] < invalid["gold_tokens"]


def test_shipped_gold_spans_are_what_the_generator_computes() -> None:
    spec = importlib.util.spec_from_file_location("make_eval", EXAMPLES / "make_eval_examples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shipped = [
        json.loads(line)
        for line in (EXAMPLES / "gold_spans.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert shipped == module.gold_rows()
    assert [
        json.loads(line)
        for line in (EXAMPLES / "processbench.jsonl").read_text(encoding="utf-8").splitlines()
    ] == module.processbench_rows()


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def test_bad_records_are_all_named_before_anything_is_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tok = str(EXAMPLES / "tokenizer")
    rows: list[dict[str, Any]] = [
        {"id": "a", "problem": "p", "steps": ["x", "y"], "label": 2},
        {"id": "b", "steps": ["x"], "label": -1},
        {"id": "b", "steps": ["x"], "label": -1},
        {"id": "c", "response_token_ids": [1, 2, 3], "tokenizer": tok,
         "spans": [{"start": 1, "end": 9, "label": "invalid"}]},
        {"id": "d", "response_token_ids": [1, 2], "tokenizer": tok,
         "spans": [{"start": 0, "end": 1, "label": "wrong_label"}]},
        {"id": "e", "problem": "neither"},
    ]  # fmt: skip
    out = tmp_path / "report.json"
    assert _eval(str(_write(tmp_path / "bad.jsonl", rows)), "--tokenizer", tok, "-o", str(out)) == 2
    err = capsys.readouterr().err
    assert "line 1.label: label 2 is not a step: there are 2 steps" in err
    assert "line 3.id: 'b' is on line 2 too" in err
    assert "line 4.spans[0].end: end 9 is past the rollout's 3 tokens" in err
    assert "line 5.spans[0].label" in err and "wrong_label" in err
    assert "line 6: neither a ProcessBench record" in err
    assert not out.exists()
    # steps without a tokenizer anywhere
    rows = [{"id": "a", "steps": ["x"], "label": -1}]
    assert _eval(str(_write(tmp_path / "no-tok.jsonl", rows)), "-o", str(out)) == 2
    assert "line 1.steps: a ProcessBench record is turned into token ids with --tokenizer" in (
        capsys.readouterr().err
    )
    # an option out of range, named as the option
    assert _eval(str(_write(tmp_path / "ok.jsonl", rows)), "-o", str(out), "--deadline-s", "0") == 2
    assert "--deadline-s: Input should be greater than 0" in capsys.readouterr().err


def test_a_failed_record_counts_as_wrong_and_is_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUDGE_MAX_TOKENS_PER_ROLLOUT", "40")
    long_steps = ["17 × 20 = 340."] * 6 + ["\\boxed{340}"]
    rows = [
        {"id": "short-wrong", "steps": ["2 + 2 = 5.", "\\boxed{5}"], "label": 0},
        {"id": "long-correct", "steps": long_steps, "label": -1},  # too long: fails
        {"id": "short-correct", "steps": ["2 + 2 = 4.", "\\boxed{4}"], "label": -1},
    ]
    out = tmp_path / "report.json"
    src = _write(tmp_path / "in.jsonl", rows)
    assert _eval(str(src), "--tokenizer", str(EXAMPLES / "tokenizer"), "-o", str(out)) == 0
    report = _report(out)
    _check_consistent(report)
    by_id = {r["id"]: r for r in report["records"]}
    failed = by_id["long-correct"]
    assert failed["status"] == "failed" and failed["predicted"] is None
    assert failed["correct"] is False and "JUDGE_MAX_TOKENS_PER_ROLLOUT" in failed["error"]
    assert [f["id"] for f in report["failed"]] == ["long-correct"]
    assert by_id["short-wrong"]["predicted"] == 0 and by_id["short-correct"]["predicted"] == -1
    scores = report["processbench"]
    assert scores["acc_correct"] == 0.5 and scores["counts"]["failed"] == 1


# --- an LLM judge through the scripted OpenAI server ---------------------------------------


def _step_span(
    tokenizer: LoadedTokenizer, steps: list[str], step: int, phrase: str, label: str
) -> dict[str, Any]:
    seg = segment_steps(tokenizer, steps, "test")
    trace = tokenizer.decode(seg.token_ids)
    begin = trace.text.index(phrase, trace.char_range(*seg.step_range(step))[0])
    start, end = trace.tokens_for_chars(begin, begin + len(phrase))
    assert seg.step_of(start) == step
    return {"start": start, "end": end, "label": label, "confidence": 0.9, "evidence": phrase}


@pytest.fixture
def llm_server() -> Iterator[FakeProviderServer]:
    """A scripted OpenAI server that also answers the pre-flight (models list, tiny request)."""
    with openai_server(models=["gpt-test"], unscripted=Reply(text="ok")) as server:
        yield server


@pytest.mark.usefixtures("provider_keys")
def test_llm_judge_eval_reports_fallbacks_cost_and_latency(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm_server: FakeProviderServer
) -> None:
    server = llm_server
    tokenizer = TokenizerCache().get(str(EXAMPLES / "tokenizer"))
    wrong = ["Split 17 into 10 + 7.", "23 × 10 = 230 and 23 × 7 = 151.", "\\boxed{381}"]
    right = ["Split 17 into 10 + 7.", "23 × 7 = 161.", "230 + 161 = 391.", "\\boxed{391}"]
    server.book.add(
        "eval-wrong", submit([_step_span(tokenizer, wrong, 1, "23 × 7 = 151", "invalid")])
    )
    server.book.add(
        "eval-right",
        submit([_step_span(tokenizer, right, 2, "230 + 161 = 391", "valid_progress")]),
    )
    server.book.add("eval-down", Fault(400, message="model is not available"))
    rows = [
        {"id": "wrong", "problem": "What is 23 × 17? SCRIPT:eval-wrong", "steps": wrong,
         "label": 1},
        {"id": "right", "problem": "What is 23 × 17? SCRIPT:eval-right", "steps": right,
         "label": -1},
        {"id": "down", "problem": "What is 23 × 17? SCRIPT:eval-down", "steps": wrong,
         "label": 1},
    ]  # fmt: skip
    monkeypatch.setenv("JUDGE_LLM_OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("JUDGE_LLM_MAX_RETRIES", "0")
    # cached input priced as uncached: the expected cost does not depend on the cache
    prices = {"openai:gpt-test": {"input": 2.0, "output": 8.0, "cache_read": 2.0}}
    monkeypatch.setenv("JUDGE_LLM_PRICES", json.dumps(prices))
    out = tmp_path / "report.json"
    src = _write(tmp_path / "in.jsonl", rows)
    code = _eval(
        str(src), "--judge", "openai:gpt-test", "--tokenizer", str(EXAMPLES / "tokenizer"),
        "--deadline-s", "20", "-o", str(out),
    )  # fmt: skip
    assert code == 0
    report = _report(out)
    _check_consistent(report)
    by_id = {r["id"]: r for r in report["records"]}
    assert by_id["wrong"]["status"] == "ok" and by_id["wrong"]["predicted"] == 1
    assert by_id["right"]["status"] == "ok" and by_id["right"]["predicted"] == -1
    down = by_id["down"]
    assert down["status"] == "fallback" and down["error"]
    # the rules judge stood in, and found the false link itself
    assert down["judge"] == "rules" and down["predicted"] == 1
    assert report["fallback_rate"] == pytest.approx(1 / 3)
    assert report["judge"]["spec"] == "openai:gpt-test"
    assert report["judge"]["used"] == {"openai:gpt-test": 2, "rules": 1}
    assert report["processbench"]["f1"] == 1.0
    # cost: exactly the price table applied to the tokens the server reported
    sent = [r for r in server.requests if r.script in {"eval-wrong", "eval-right"}]
    prompt = sum(r.response["usage"]["prompt_tokens"] for r in sent)
    completion = sum(r.response["usage"]["completion_tokens"] for r in sent)
    usage = report["usage"]
    assert prompt > 0 and usage["input_tokens"] + usage["cache_read_tokens"] == prompt
    assert usage["output_tokens"] == completion
    assert report["cost_usd"] == pytest.approx((prompt * 2.0 + completion * 8.0) / 1e6)
    assert report["latency_ms"]["n"] == 3
    assert any(r.script is None for r in server.requests)  # the pre-flight asked first
    assert np.isfinite(report["latency_ms"]["p95"])


@pytest.mark.usefixtures("provider_keys")
def test_an_llm_judge_that_cannot_run_is_stopped_before_any_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("JUDGE_LLM_OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    rows = [{"id": "a", "steps": ["2 + 2 = 5.", "\\boxed{5}"], "label": 0}]
    out = tmp_path / "report.json"
    src = _write(tmp_path / "in.jsonl", rows)
    tok = str(EXAMPLES / "tokenizer")
    assert _eval(str(src), "--judge", "openai:gpt-test", "--tokenizer", tok, "-o", str(out)) == 1
    err = capsys.readouterr().err
    assert "pre-flight" in err and f"127.0.0.1:{port}" in err
    assert not out.exists()
