"""Compile and run untrusted code under RestrictedPython; the zygote's Python handler.

Everything here runs in the confined child, never in the service: compiling
hostile source can itself exhaust memory or recursion (``"-" * 100000``).
The last expression statement is rewritten, after RestrictedPython has
checked the tree, into an assignment to a name untrusted code cannot spell
(it starts with an underscore), so its value can be reported like a REPL's.
"""

from __future__ import annotations

import ast
import signal
import time
from types import CodeType, FrameType, TracebackType
from typing import Any

from RestrictedPython.transformer import RestrictingNodeTransformer

from sandbox.errors import CompileFailure, Forbidden, OutputLimit, Timeout
from sandbox.isolation import IsolationReport
from sandbox.policy import Importer, OutputBuffer, make_globals
from sandbox.result import ErrorKind, RunResult

FILENAME = "<sandbox>"
_VALUE = "__sandbox_value__"
_MAX_MESSAGE = 2000


def compile_program(source: str) -> CodeType:
    """Parse, check against RestrictedPython's policy, and compile."""
    try:
        tree = ast.parse(source, filename=FILENAME, mode="exec")
    except SyntaxError as exc:
        raise CompileFailure("syntax", f"SyntaxError: {exc.msg} (line {exc.lineno})") from None
    except ValueError as exc:  # NUL bytes on some 3.11 patch releases
        raise CompileFailure("syntax", f"SyntaxError: {exc}") from None
    except (RecursionError, MemoryError) as exc:
        raise CompileFailure("syntax", _too_deep(exc)) from None
    errors: list[str] = []
    try:
        RestrictingNodeTransformer(errors, [], {}).visit(tree)
    except (RecursionError, MemoryError) as exc:
        raise CompileFailure("syntax", _too_deep(exc)) from None
    if errors:
        shown = "; ".join(errors[:5]) + ("; ..." if len(errors) > 5 else "")
        raise CompileFailure("forbidden", shown)
    _capture_last_value(tree)
    try:
        return compile(tree, FILENAME, "exec")
    except SyntaxError as exc:
        raise CompileFailure("syntax", f"SyntaxError: {exc.msg} (line {exc.lineno})") from None
    except (RecursionError, MemoryError, ValueError) as exc:
        raise CompileFailure("syntax", _too_deep(exc)) from None


def _too_deep(exc: BaseException) -> str:
    return f"the code is nested too deeply or is too large to compile ({type(exc).__name__})"


def _capture_last_value(tree: ast.Module) -> None:
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1]
        assign = ast.Assign(targets=[ast.Name(_VALUE, ast.Store())], value=last.value)
        tree.body[-1] = ast.copy_location(assign, last)
        ast.fix_missing_locations(tree)


def render_value(value: object, limit: int) -> str | None:
    if value is None:
        return None
    try:
        text = repr(value)
    except ValueError as exc:  # e.g. an int beyond the 4,300-digit conversion limit
        text = f"<{type(value).__name__}: {exc}>"
    return _clip(text, limit)


def _clip(text: str, limit: int) -> str:
    return (
        text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters]"
    )


def _line_of(tb: TracebackType | None) -> int | None:
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _classify(exc: BaseException, timeout_s: float) -> tuple[ErrorKind, str]:
    if isinstance(exc, Timeout):
        return "timeout", f"the code ran past its {timeout_s:g} s time limit"
    if isinstance(exc, Forbidden):
        return "forbidden", str(exc)
    if isinstance(exc, OutputLimit):
        return "output_limit", str(exc)
    if isinstance(exc, MemoryError):
        return "memory", "the code ran out of memory (MemoryError)"
    line = _line_of(exc.__traceback__)
    where = f" (line {line})" if line is not None else ""
    try:
        text = str(exc)
    except Exception:  # an exception whose message cannot be rendered still has a type
        text = "<message unavailable>"
    return "runtime", _clip(f"{type(exc).__name__}: {text}{where}", _MAX_MESSAGE)


def _raise_timeout(signum: int, frame: FrameType | None) -> None:
    raise Timeout()


def execute(
    source: str,
    *,
    timeout_s: float,
    max_output_chars: int,
    max_value_chars: int,
    sympy_reason: str | None,
) -> RunResult:
    """Run `source` in this process; the caller must already be confined."""
    started = time.perf_counter()
    buffer = OutputBuffer(max_output_chars)
    outcome: dict[str, Any] = {}
    try:
        signal.signal(signal.SIGALRM, _raise_timeout)
        signal.signal(signal.SIGXCPU, _raise_timeout)
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
        namespace: dict[str, Any] = {}
        try:
            code = compile_program(source)
            namespace.update(make_globals(buffer, Importer(sympy_reason=sympy_reason)))
            exec(code, namespace)
            outcome = {"ok": True, "value": render_value(namespace.get(_VALUE), max_value_chars)}
        except CompileFailure as failure:
            outcome = {"ok": False, "kind": failure.kind, "message": failure.message}
        except BaseException as exc:
            if isinstance(exc, MemoryError):  # free what filled memory before describing it
                namespace.clear()
                exc.__traceback__ = None
            kind, message = _classify(exc, timeout_s)
            outcome = {"ok": False, "kind": kind, "message": message}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except Timeout:  # fired while a failure was being described
        outcome = {"ok": False, "kind": "timeout", "message": _classify(Timeout(), timeout_s)[1]}
    return RunResult(
        stdout=buffer.text,
        stdout_truncated=buffer.truncated,
        duration_ms=(time.perf_counter() - started) * 1000,
        **outcome,
    )


# -- the zygote's handler interface -------------------------------------------

_WARMUP = """
import math, fractions, decimal, itertools, functools, statistics
import sympy
x, y = sympy.symbols('x y')
sympy.factor(x**2 - 1), sympy.expand((x + y)**3), sympy.simplify(sympy.sin(x)**2 + sympy.cos(x)**2)
sympy.solve(x**2 - 2, x), sympy.integrate(x * sympy.exp(x), x), sympy.limit(sympy.sin(x) / x, x, 0)
sympy.series(sympy.exp(x), x, 0, 4), sympy.Rational(1, 3) + sympy.sqrt(8), sympy.nsimplify(0.5)
sympy.Matrix([[1, 2], [3, 4]]).det(), sympy.isprime(97), sympy.N(sympy.pi, 30), sympy.latex(x**2)
sympy.sympify('x + 1'), sympy.diff(sympy.log(x), x), sympy.gcd(12, 18), sympy.binomial(10, 3)
print(str(sympy.Eq(x, 1)))
"""


def preload() -> None:
    """Import and exercise what calls will use, so forked children start warm."""
    result = execute(
        _WARMUP, timeout_s=120, max_output_chars=1000, max_value_chars=1000, sympy_reason=None
    )
    if not result.ok:
        raise RuntimeError(f"sandbox warm-up failed: {result.kind}: {result.message}")


def handle(payload: dict[str, Any], report: IsolationReport) -> dict[str, Any]:
    if report.holds:
        sympy_reason = None
    else:
        sympy_reason = f"the sandbox's OS isolation does not hold ({report.reason})"
    return execute(
        str(payload["code"]),
        timeout_s=float(payload["timeout_s"]),
        max_output_chars=int(payload["max_output_chars"]),
        max_value_chars=int(payload["max_value_chars"]),
        sympy_reason=sympy_reason,
    ).to_dict()
