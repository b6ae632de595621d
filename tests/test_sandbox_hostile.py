"""The hostile suite: each snippet with the outcome it must have.

All snippets run once, concurrently, through one sandbox pool (a module
fixture); each test then checks one snippet's outcome. The snippets that go
through ``sympy.sympify`` reach unrestricted Python (sympify evaluates with
``eval``), so for them only the OS layer stands between the code and the
host: they try to read a planted secret, write outside the private tmp, open
a socket to a listener on the host, and spawn processes that outlive the call.
"""

from __future__ import annotations

import ast
import asyncio
import os
import secrets
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import sandbox
from sandbox import RunResult, Sandbox
from sandbox.isolation import is_sandbox_uid

TIMEOUT_S = 1.0
MEMORY_MB = 128

SYNTAX, FORBIDDEN, RUNTIME = {"syntax"}, {"forbidden"}, {"runtime"}
TIMEOUT, MEMORY, OUTPUT = {"timeout"}, {"memory"}, {"output_limit"}
STOPPED = {"timeout", "memory"}  # either limit may trip first
OK = {"ok"}


@dataclass
class Case:
    code: str
    outcomes: set[str]  # result.kind, or "ok" for a contained, successful run
    escape: bool = False  # unrestricted Python via sympy: needs the OS layer
    check: Callable[[RunResult], bool] | None = None
    note: str = field(default="")


def _listing(result: RunResult) -> set[str]:
    return set(ast.literal_eval(result.value or "[]"))


def sympify(expression: str) -> str:
    """Code that makes sympy ``eval`` `expression` with full builtins."""
    return f"import sympy\nsympy.sympify({expression!r})"


def py(statements: str) -> str:
    """An expression that runs `statements` as unrestricted Python (via exec)."""
    return f"__import__('builtins').exec({statements!r})"


SECRET = secrets.token_hex(16)


def cases(secret_path: Path, escape_path: Path, port: int, package_dir: Path) -> dict[str, Case]:
    return {
        # imports of what the OS would do
        "import_os": Case("import os", FORBIDDEN),
        "import_subprocess": Case("import subprocess", FORBIDDEN),
        "import_socket": Case("import socket", FORBIDDEN),
        "import_ctypes": Case("import ctypes", FORBIDDEN),
        "from_os_import": Case("from os import system", FORBIDDEN),
        "import_importlib": Case("import importlib", FORBIDDEN),
        "dunder_import": Case("__import__('os')", FORBIDDEN),
        "relative_import": Case("from . import x", FORBIDDEN),
        "submodule_of_allowed": Case("import math.os", FORBIDDEN),
        # files
        "open": Case("open('/etc/passwd').read()", FORBIDDEN),
        "open_secret": Case(f"open({str(secret_path)!r}).read()", FORBIDDEN),
        # class-hierarchy walks
        "subclasses_walk": Case("().__class__.__bases__[0].__subclasses__()", FORBIDDEN),
        "mro_walk": Case("[].__class__.__mro__[-1].__subclasses__()", FORBIDDEN),
        "getattr_dunder": Case("getattr((), '__class__')", FORBIDDEN),
        "reduce_getattr": Case(
            "import functools\nfunctools.reduce(getattr, ['__class__', '__mro__'], 1)", FORBIDDEN
        ),
        "builtins_name": Case("__builtins__", FORBIDDEN),
        "type_builtin": Case("type(1)", FORBIDDEN),
        # format-string attribute access
        "str_format": Case("'{0.__class__.__mro__}'.format(1)", FORBIDDEN),
        "format_map": Case("'{a.__class__}'.format_map({'a': 1})", FORBIDDEN),
        "unbound_format": Case("f = str.format\nf('{0.__class__}', 1)", FORBIDDEN),
        "getattr_format": Case("getattr('', 'format')('{0.__class__}', 1)", FORBIDDEN),
        # frames through generators
        "gi_frame": Case("g = (x for x in [1])\ng.gi_frame.f_back", FORBIDDEN),
        "getattr_gi_frame": Case("g = (x for x in [1])\ngetattr(g, 'gi_frame')", FORBIDDEN),
        "gi_code": Case("def f():\n    yield 1\ngetattr(f(), 'gi_code')", FORBIDDEN),
        "f_back_in_map": Case(
            "list(map(lambda g: getattr(g, 'f_back'), [(i for i in [])]))", FORBIDDEN
        ),
        # dynamic code
        "eval": Case("eval('1 + 1')", FORBIDDEN),
        "exec": Case("exec('x = 1')", FORBIDDEN),
        "compile": Case("compile('1', 'x', 'eval')", FORBIDDEN),
        "async_def": Case("async def f():\n    pass", FORBIDDEN),
        # exception groups and positional-only guard shadowing
        "except_star": Case("try:\n    pass\nexcept* ValueError:\n    pass", FORBIDDEN),
        "posonly_getattr": Case("def f(_getattr_, /):\n    return _getattr_\nf(1)", FORBIDDEN),
        "posonly_getiter": Case("def f(a, /, _getiter_=None):\n    return a", FORBIDDEN),
        "lambda_write": Case("g = lambda _write_: 1", FORBIDDEN),
        # monkey-patching what guards use
        "patch_module": Case("import math\nmath.pi = 3", FORBIDDEN),
        "print_to_file": Case("print('x', file=[].append)", FORBIDDEN),
        "module_leaks": Case("import fractions\nfractions.sys", RUNTIME),
        # CPU, memory, output
        "while_true": Case("while True:\n    pass", TIMEOUT),
        "swallowing_loop": Case(
            "while True:\n    try:\n        pass\n    except:\n        pass", TIMEOUT
        ),
        "power_tower": Case("10**10**10", STOPPED),
        "factorial_in_c": Case("import math\nmath.factorial(10**8)", STOPPED),
        "list_bomb": Case("x = [0] * 10**10", MEMORY),
        "string_bomb": Case("x = 'a' * 2**40", MEMORY),
        "growing_bomb": Case("l = []\nwhile True:\n    l.append('x' * 10**6)", MEMORY),
        "decimal_precision": Case(
            "import decimal\ndecimal.getcontext().prec = 10**8\n"
            "decimal.Decimal(1) / decimal.Decimal(7)",
            STOPPED,
        ),
        "huge_print": Case("print('x' * 10**8)", OUTPUT),
        "print_loop": Case("for i in range(10**9):\n    print(i)", OUTPUT),
        "deep_recursion": Case("def f(n):\n    return f(n + 1)\nf(0)", RUNTIME),
        # source that breaks the compiler
        "unary_nesting": Case("x = " + "-" * 50_000 + "1", SYNTAX),
        "paren_nesting": Case("x = " + "(" * 1000 + ")" * 1000, SYNTAX),
        "list_nesting": Case("x = " + "[" * 5000 + "]" * 5000, SYNTAX),
        "long_sum": Case("x = " + "1+" * 30_000 + "1", SYNTAX),
        "ten_mb_source": Case("x = 1\n" * (10 * 2**20 // 6), FORBIDDEN),
        "nul_byte": Case("a\0b", SYNTAX),
        "nul_after_code": Case("print(1)\x00", SYNTAX),
        # sympy: eval of arbitrary Python, contained by the OS layer
        "sympy_read_secret": Case(
            sympify(f"__import__('builtins').open({str(secret_path)!r}).read()"),
            RUNTIME,
            escape=True,
        ),
        "sympy_read_secret_via_proc": Case(
            sympify("__import__('builtins').open('/proc/1/environ').read()"), RUNTIME, escape=True
        ),
        "sympy_write_host_path": Case(
            sympify(f"__import__('builtins').open({str(escape_path)!r}, 'w').write('x')"),
            RUNTIME,
            escape=True,
        ),
        "sympy_write_package_dir": Case(
            sympify(f"__import__('builtins').open({str(package_dir / 'pwned.py')!r}, 'w')"),
            RUNTIME,
            escape=True,
        ),
        "sympy_socket": Case(
            sympify(py(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), 1)")),
            RUNTIME,
            escape=True,
        ),
        "sympy_dns": Case(
            sympify(py("import socket\nsocket.getaddrinfo('example.com', 80)")),
            RUNTIME,
            escape=True,
        ),
        "sympy_subprocess": Case(
            sympify(py("import subprocess\nsubprocess.run(['/bin/sh', '-c', 'id'])")),
            RUNTIME,
            escape=True,
        ),
        "sympy_detached_child": Case(
            sympify(py("import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)")),
            RUNTIME,
            escape=True,
            check=lambda r: "Resource temporarily unavailable" in r.message,
            note="RLIMIT_NPROC=1: the sandbox uid cannot fork",
        ),
        "sympy_fork_bomb": Case(
            sympify(py("import os\nwhile True:\n    os.fork()")), RUNTIME, escape=True
        ),
        "sympy_kill_init": Case(
            sympify(py("import os, signal\nfor s in (2, 14, 15, 9):\n    os.kill(1, s)")),
            RUNTIME | OK,
            escape=True,
        ),
        "sympy_uid": Case(
            sympify("__import__('os').getuid()"),
            OK,
            escape=True,
            check=lambda r: r.value is not None and is_sandbox_uid(int(r.value)),
        ),
        "sympy_root_listing": Case(
            sympify("__import__('os').listdir('/')"),
            OK,
            escape=True,
            check=lambda r: not {"etc", "proc", "sys", "home", "boot"} & _listing(r),
        ),
    }


@dataclass
class Suite:
    results: dict[str, RunResult]
    cases: dict[str, Case]
    isolated: bool
    secret_path: Path
    escape_path: Path
    listener: socket.socket
    package_dir: Path
    strays: set[int]
    zygotes_replaced: int
    healthy_after: RunResult


def _sandbox_processes() -> dict[int, int]:
    """{pid: parent pid} of the live processes running as a sandbox uid."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as handle:
                fields = dict(line.split(":", 1) for line in handle if ":" in line)
        except OSError:
            continue
        uid = int(fields["Uid"].split()[0])
        if is_sandbox_uid(uid) and not fields["State"].strip().startswith("Z"):
            found[int(entry)] = int(fields["PPid"])
    return found


def _strays(box: Sandbox, before: set[int]) -> set[int]:
    """Sandbox-uid processes other than each zygote's one child waiting for its next call."""
    zygotes = set(box.pool.pids())
    processes = {p: q for p, q in _sandbox_processes().items() if p not in before}
    waiting = [p for p, parent in processes.items() if parent in zygotes]
    strays = set(processes) - set(waiting)
    if len(waiting) > len(zygotes):
        strays |= set(waiting)
    return strays


def _wait_for_no_strays(box: Sandbox, before: set[int]) -> set[int]:
    deadline = time.monotonic() + 5
    while (strays := _strays(box, before)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return strays


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    base = tmp_path_factory.mktemp("hostile")
    secret_path = base / "secret.txt"
    secret_path.write_text(SECRET)
    secret_path.chmod(0o644)  # readable by anyone: only the sandbox's view may hide it
    escape_path = base / "escaped.txt"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    package_dir = Path(sandbox.__file__).parent
    all_cases = cases(secret_path, escape_path, listener.getsockname()[1], package_dir)
    before = set(_sandbox_processes())

    with Sandbox(pool_size=3, timeout_s=TIMEOUT_S, memory_mb=MEMORY_MB) as box:
        report = box.start()

        async def run_all() -> dict[str, RunResult]:
            names = list(all_cases)
            done = await asyncio.gather(*(box.run_async(all_cases[n].code) for n in names))
            return dict(zip(names, done, strict=True))

        results = asyncio.run(run_all())
        healthy = box.run("sum(range(10))")
        strays = _wait_for_no_strays(box, before)
        yield Suite(
            results=results,
            cases=all_cases,
            isolated=report.holds,
            secret_path=secret_path,
            escape_path=escape_path,
            listener=listener,
            package_dir=package_dir,
            strays=strays,
            zygotes_replaced=box.pool.replaced,
            healthy_after=healthy,
        )
    listener.close()


def _case_names() -> list[str]:
    return list(cases(Path("/s"), Path("/e"), 1, Path("/p")))


def test_the_suite_is_large_enough() -> None:
    assert len(_case_names()) >= 40


@pytest.mark.parametrize("name", _case_names())
def test_hostile_snippet_has_its_outcome(suite: Suite, name: str) -> None:
    case, result = suite.cases[name], suite.results[name]
    expected = case.outcomes if (suite.isolated or not case.escape) else FORBIDDEN
    outcome = "ok" if result.ok else str(result.kind)
    assert outcome in expected, f"{name}: {result}"
    if case.check is not None and suite.isolated:
        assert case.check(result), f"{name}: {result}"
    for text in (result.stdout, result.value or "", result.message):
        assert SECRET not in text


def test_the_os_layer_holds_here(suite: Suite) -> None:
    # CI runs as root on Debian 12: namespaces are available, so the escape
    # snippets above really ran unrestricted Python inside the OS boundary.
    assert suite.isolated


def test_the_secret_was_not_reachable(suite: Suite) -> None:
    result = suite.results["sympy_read_secret"]
    assert "No such file or directory" in result.message


def test_nothing_was_written_outside_the_private_tmp(suite: Suite) -> None:
    assert not suite.escape_path.exists()
    assert not (suite.package_dir / "pwned.py").exists()
    assert "Read-only file system" in suite.results["sympy_write_package_dir"].message


def test_no_connection_reached_the_host(suite: Suite) -> None:
    with pytest.raises(BlockingIOError):
        suite.listener.accept()
    assert "unreachable" in suite.results["sympy_socket"].message.lower()


def test_no_sandbox_process_outlives_its_call(suite: Suite) -> None:
    assert suite.strays == set()


def test_the_pool_still_serves_after_the_suite(suite: Suite) -> None:
    assert suite.healthy_after.ok and suite.healthy_after.value == "45"
    assert suite.zygotes_replaced == 0


def test_processes_a_call_starts_die_with_it() -> None:
    # With forking allowed, what the code leaves behind (a detached daemon, a
    # bomb's survivors) is killed by the PID namespace's reaper after the call.
    before = set(_sandbox_processes())
    daemon = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)"
    bomb = "import os\nfor i in range(8):\n    if os.fork() == 0:\n        time.sleep(60)"
    with Sandbox(pool_size=1, timeout_s=2.0, memory_mb=MEMORY_MB, max_processes=16) as box:
        first = box.run(sympify(py(daemon)))
        second = box.run(sympify(py("import time\n" + bomb)))
        assert first.ok and second.ok, (first, second)
        assert _wait_for_no_strays(box, before) == set()
        assert box.pool.replaced == 0  # the reaper cleaned up; no zygote had to die for it
        assert box.run("1 + 1").value == "2"


@pytest.mark.slow
async def test_other_calls_are_served_while_hostile_ones_run() -> None:
    spin = "while True:\n    pass"
    swallow = "while True:\n    try:\n        pass\n    except:\n        pass"
    with Sandbox(pool_size=3, timeout_s=3.0, memory_mb=MEMORY_MB) as box:
        await asyncio.get_running_loop().run_in_executor(None, box.start)
        hostile = [asyncio.ensure_future(box.run_async(code)) for code in (spin, swallow)]
        await asyncio.sleep(0.2)  # both hostile calls are now running
        started = time.monotonic()
        quick = [await box.run_async(f"{i} * 2") for i in range(10)]
        quick_elapsed = time.monotonic() - started
        assert not any(task.done() for task in hostile)
        assert [r.value for r in quick] == [str(i * 2) for i in range(10)]
        assert quick_elapsed < 2.5
        outcomes = await asyncio.gather(*hostile)
        assert [r.kind for r in outcomes] == ["timeout", "timeout"]
