"""The sandbox's behaviour for ordinary code, its limits, its pool and its CLI."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import sandbox
from sandbox import RunResult, Sandbox
from sandbox.errors import FrameError, FrameTimeout
from sandbox.isolation import is_sandbox_uid
from sandbox.protocol import read_frame, write_frame

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    with Sandbox(pool_size=2, timeout_s=2.0, memory_mb=128, max_output_chars=1000) as instance:
        instance.start()
        yield instance


def test_value_of_the_last_expression(box: Sandbox) -> None:
    result = box.run("import math\nmath.factorial(20)")
    assert result.ok and result.value == "2432902008176640000" and result.kind is None


def test_printed_output_and_value_together(box: Sandbox) -> None:
    result = box.run("for i in range(3):\n    print(i, end=' ')\n'done'")
    assert (result.stdout, result.value) == ("0 1 2 ", "'done'")


def test_no_value_when_the_code_ends_in_a_statement_or_none(box: Sandbox) -> None:
    assert box.run("x = 1").value is None
    assert box.run("print('hi')").value is None
    assert box.run("None").value is None


def test_allowed_modules_work(box: Sandbox) -> None:
    code = (
        "from fractions import Fraction\nimport statistics, itertools, functools, decimal, cmath\n"
        "[str(Fraction(1, 3) + Fraction(1, 6)), statistics.mean([1, 2, 3, 4]),"
        " len(list(itertools.permutations(range(4)))),"
        " functools.reduce(lambda a, b: a * b, [1, 2, 3]),"
        " str(decimal.Decimal('1.1') + decimal.Decimal('2.2')), cmath.sqrt(-1)]"
    )
    assert box.run(code).value == "['1/2', 2.5, 24, 6, '3.3', 1j]"


def test_sympy_is_offered_when_isolated(box: Sandbox) -> None:
    code = "import sympy\nx = sympy.Symbol('x')\nsympy.solve(x**2 - 2, x)"
    assert box.run(code).value == "[-sqrt(2), sqrt(2)]"


def test_user_classes_and_their_attributes_work(box: Sandbox) -> None:
    code = "class P:\n    def __init__(self, x):\n        self.x = x\nP(4).x * 2"
    assert box.run(code).value == "8"


def test_runtime_error_names_type_message_and_line(box: Sandbox) -> None:
    result = box.run("x = 1\ny = 0\nx / y")
    assert not result.ok and result.kind == "runtime"
    assert result.message == "ZeroDivisionError: division by zero (line 3)"


def test_output_before_an_error_is_kept(box: Sandbox) -> None:
    result = box.run("print('before')\n1 / 0")
    assert result.kind == "runtime" and result.stdout == "before\n"


def test_syntax_error(box: Sandbox) -> None:
    result = box.run("def f(:\n  pass")
    assert result.kind == "syntax" and "line 1" in result.message


def test_underscore_names_are_forbidden_at_compile_time(box: Sandbox) -> None:
    result = box.run("_secret = 1")
    assert result.kind == "forbidden" and "starts with" in result.message


def test_output_is_capped(box: Sandbox) -> None:
    result = box.run("print('y' * 5000)")
    assert result.kind == "output_limit"
    assert result.stdout == "y" * 1000 and result.stdout_truncated


def test_long_values_are_clipped(box: Sandbox) -> None:
    with Sandbox(pool_size=1, max_value_chars=50) as small:
        value = small.run("list(range(1000))").value
    assert value is not None and value.startswith("[0, 1, 2") and "more characters" in value


def test_huge_ints_are_reported_not_crashed_on(box: Sandbox) -> None:
    result = box.run("10 ** 5000")
    assert result.ok and result.value is not None and "digits" in result.value


def test_timeout_follows_the_call_setting(box: Sandbox) -> None:
    started = time.monotonic()
    result = box.run("while True:\n    pass", timeout_s=0.5)
    elapsed = time.monotonic() - started
    assert result.kind == "timeout" and "0.5 s" in result.message
    assert elapsed < 0.5 + 1.5


def test_memory_limit_follows_the_call_setting(box: Sandbox) -> None:
    code = "x = bytearray(200 * 2**20)\nlen(x)"
    assert box.run(code, memory_mb=64).kind == "memory"
    assert box.run(code, memory_mb=512).value == str(200 * 2**20)


def test_each_call_starts_fresh(box: Sandbox) -> None:
    assert box.run("counter = 41").ok
    assert box.run("counter + 1").kind == "runtime"


def test_each_call_gets_an_empty_private_tmp(box: Sandbox) -> None:
    # The private scratch space is TMPDIR: /tmp, or /scratch when the Python
    # installation itself lives under /tmp (a checkout there) and must stay visible.
    where = "__import__('tempfile').gettempdir()"
    write = (
        "import sympy\nsympy.sympify(\"__import__('builtins').open("
        f"{where} + '/note', 'w').write('hi')\")"
    )
    listing = f"import sympy\nsympy.sympify(\"__import__('os').listdir({where})\")"
    scratch = f'import sympy\nsympy.sympify("{where}")'
    assert box.run(scratch).value in ("'/tmp'", "'/scratch'")
    assert box.run(write).value == "2"
    assert box.run(listing).value == "[]"


def test_oversized_source_is_refused_before_compiling(box: Sandbox) -> None:
    result = box.run("x = 1\n" * 50_000)
    assert result.kind == "forbidden" and "limit is 100000" in result.message


def test_bad_arguments_are_results_not_exceptions(box: Sandbox) -> None:
    assert box.run(123).kind == "internal"  # type: ignore[arg-type]
    assert box.run("1", timeout_s=0).kind == "internal"


async def test_async_calls_run_concurrently_on_the_pool(box: Sandbox) -> None:
    # Sleeping takes no CPU, so on any machine two 1 s sleeps on a pool of two
    # overlap (about 1 s in all) unless one call waits for the other (2 s).
    sleep = "import sympy\nsympy.sympify(\"__import__('time').sleep(1)\")\n'slept'"
    started = time.monotonic()
    results = await asyncio.gather(box.run_async(sleep), box.run_async(sleep))
    elapsed = time.monotonic() - started
    assert [r.value for r in results] == ["'slept'", "'slept'"]
    assert elapsed < 1.8


def test_a_dead_zygote_is_replaced() -> None:
    with Sandbox(pool_size=1, timeout_s=2.0) as one:
        one.start()
        (pid,) = one.pool.pids()
        os.kill(pid, signal.SIGKILL)
        result = one.run("6 * 7")
        assert result.value == "42"
        assert one.pool.pids() != [pid] and one.pool.replaced == 1


def _waiting_children(zygote: int) -> list[int]:
    """The zygote's sandbox-uid children: the one forked ahead for the next call."""
    children = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if (
            int(fields["PPid"]) == zygote
            and is_sandbox_uid(int(fields["Uid"].split()[0]))
            and not fields["State"].strip().startswith("Z")
        ):
            children.append(int(entry))
    return children


def test_a_waiting_child_killed_from_outside_costs_nothing() -> None:
    with Sandbox(pool_size=1, timeout_s=2.0) as one:
        assert one.run("1").ok
        (zygote,) = one.pool.pids()
        # Right after a call, the finished child may still be on its way out while the
        # next one is already forked: wait until the one forked ahead is alone.
        deadline = time.monotonic() + 5
        while len(waiting := _waiting_children(zygote)) != 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(waiting) == 1
        os.kill(waiting[0], signal.SIGKILL)
        time.sleep(0.1)
        assert one.run("6 * 7").value == "42"
        assert one.pool.replaced == 0


def test_a_call_whose_zygote_is_killed_is_retried_on_a_fresh_one() -> None:
    with Sandbox(pool_size=1, timeout_s=1.0) as one:
        one.start()
        (pid,) = one.pool.pids()

        async def scenario() -> tuple[RunResult, RunResult]:
            slow = asyncio.ensure_future(one.run_async("print('started')\nwhile True:\n    pass"))
            await asyncio.sleep(0.3)
            os.kill(pid, signal.SIGKILL)
            return await slow, await one.run_async("1 + 1")

        retried, after = asyncio.run(scenario())
        assert (retried.kind, retried.stdout) == ("timeout", "started\n")
        assert after.value == "2" and one.pool.replaced == 1


def test_isolation_status_reports_what_holds(box: Sandbox) -> None:
    status = box.isolation_status()
    assert status["isolated"] is True and status["sympy"] is True
    assert status["mode"] == "root" and status["reason"] is None
    assert status["zygotes_alive"] == 2
    module_status = sandbox.isolation_status()
    assert module_status["isolated"] is True


def test_probe_agrees_with_the_pool(box: Sandbox) -> None:
    probe = sandbox.probe_isolation()
    assert probe["source"] == "probe"
    assert {k: probe[k] for k in ("mode", "isolated")} == {"mode": "root", "isolated": True}


def test_without_the_os_layer_sympy_is_refused_and_said_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="sandbox"),
        Sandbox(pool_size=1, isolation="off") as bare,
    ):
        report = bare.start()
        result = bare.run("import sympy")
        plain = bare.run("import math\nmath.gcd(12, 18)")
        status = bare.isolation_status()
    assert not report.holds
    assert result.kind == "forbidden" and "isolation does not hold" in result.message
    assert plain.value == "6"
    assert status["isolated"] is False and status["sympy"] is False
    assert "disabled by configuration" in status["reason"]
    assert any("OS isolation does not hold" in r.getMessage() for r in caplog.records)


def test_require_starts_where_isolation_holds() -> None:
    with Sandbox(pool_size=1, isolation="require") as strict:
        assert strict.start().holds


def test_result_from_a_malformed_report_is_internal() -> None:
    assert RunResult.from_dict({"ok": True, "kind": "exploded"}).kind == "internal"
    assert RunResult.from_dict({"ok": True, "value": 3}).value == "3"


def test_module_level_run_uses_the_default_sandbox() -> None:
    result = sandbox.run("2 ** 10", timeout_s=2, memory_mb=64)
    assert result.value == "1024"
    assert sandbox.default_sandbox().pool.pids()


def test_python_dash_m_sandbox_prints_json() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sandbox", "--timeout", "2"],
        input="print('hi')\n3 * 3",
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["ok"], result["stdout"], result["value"]) == (True, "hi\n", "9")
    failed = subprocess.run(
        [sys.executable, "-m", "sandbox"],
        input="import os",
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert failed.returncode == 1 and json.loads(failed.stdout)["kind"] == "forbidden"


def test_frames_respect_size_caps_and_deadlines() -> None:
    read_end, write_end = os.pipe()
    try:
        write_frame(write_end, {"x": "y" * 100})
        with pytest.raises(FrameError, match="exceeds"):
            read_frame(read_end, max_bytes=10)
    finally:
        os.close(read_end)
        os.close(write_end)
    read_end, write_end = os.pipe()
    try:
        with pytest.raises(FrameTimeout):
            read_frame(read_end, max_bytes=10, deadline=time.monotonic() + 0.05)
        write_frame(write_end, {"ok": 1})
        assert read_frame(read_end, max_bytes=100) == {"ok": 1}
    finally:
        os.close(read_end)
        os.close(write_end)
