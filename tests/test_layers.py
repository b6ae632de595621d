"""judge_service's imports keep its layers (judge_service/devtools/layers.py): no
top-level import cycle, every module in a layer, no import up a layer that the
allow-list does not name with its reason, and ARCHITECTURE.md's picture rendered from
the same tables. The checker itself (devtools/imports.py) is tried on small packages
written here, and on a copy of judge_service with a loop planted in it."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from judge_service.devtools import layers
from judge_service.devtools.imports import Layer, cycles, layer_index, scan, unassigned, upward

PKG = "pkg"


@pytest.fixture(scope="module")
def found() -> layers.Report:
    return layers.report()  # one walk of judge_service for the tests that read it


def _write(root: Path, files: dict[str, str]) -> Path:
    package = root / PKG
    for name, source in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")
    return package


def _edges(package: Path) -> set[tuple[str, str, bool]]:
    _, found = scan(package)
    return {(e.importer, e.imported, e.top) for e in found}


# --- judge_service itself ---------------------------------------------------------


def test_judge_service_has_no_top_level_import_cycle(found: layers.Report) -> None:
    assert found.cycles == []


def test_every_module_has_a_layer(found: layers.Report) -> None:
    assert found.unassigned == []


def test_no_name_is_in_two_layers() -> None:
    members = [member for layer in layers.LAYERS for member in layer.members]
    assert len(members) == len(set(members))


def test_no_upward_import_outside_the_allow_list(found: layers.Report) -> None:
    bad = [f"{layers.key(e)} line {e.line}" for e in found.disallowed]
    assert bad == [], "an import runs up a layer: move it down, or allow it with a reason"


def test_the_allow_list_holds_only_imports_that_exist_each_with_one_line_reason(
    found: layers.Report,
) -> None:
    assert found.stale == []
    for entry, why in layers.ALLOWED.items():
        assert entry[2] in ("top", "function")
        assert why.strip() and "\n" not in why, entry


def test_loops_through_function_imports_stay_inside_one_layer(found: layers.Report) -> None:
    # A loop across layers would hold an upward import; inside one layer it is a
    # compiled module reaching back for its Python definition on first use.
    table = layers.qualified(layers.LAYERS)
    for loop in found.loops:
        assert len({layer_index(module, table) for module in loop}) == 1, (
            f"an import loop across layers: {loop}; break it where it runs up a layer"
        )


def test_architecture_layers_section_is_rendered_from_the_tables() -> None:
    document = layers.ARCHITECTURE.read_text(encoding="utf-8")
    assert layers.BEGIN in document and layers.END in document
    assert layers.replaced(document) == document, (
        "run python -m judge_service.devtools.layers --write"
    )
    for layer in layers.LAYERS:
        assert layer.name in document


def test_a_loop_planted_in_a_copy_of_judge_service_is_found(tmp_path: Path) -> None:
    copy = tmp_path / "judge_service"
    shutil.copytree(layers.ROOT, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.c"))
    grounding = copy / "grounding.py"
    grounding.write_text(
        grounding.read_text(encoding="utf-8") + "\nfrom judge_service.validate import validate\n",
        encoding="utf-8",
    )
    found = layers.report(copy)
    assert [
        "judge_service.evidence_index",
        "judge_service.grounding",
        "judge_service.validate",
    ] in (found.cycles)
    assert ("grounding", "validate", "top") in [layers.key(e) for e in found.disallowed]


# --- the checker, on packages written here ------------------------------------------


def test_a_top_level_cycle_is_found_and_a_lazy_one_is_not(tmp_path: Path) -> None:
    package = _write(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from pkg import b\n",
            "b.py": "import pkg.c\n",
            "c.py": "from pkg.a import thing\n",  # a -> b -> c -> a
            "d.py": "def f():\n    from pkg import e\n",
            "e.py": "import pkg.d\n",  # d -> e only in a function
            "f.py": "from . import f\n",  # a module importing itself
        },
    )
    _, edges = scan(package)
    assert cycles(edges) == [["pkg.a", "pkg.b", "pkg.c"], ["pkg.f"]]
    assert cycles(edges, top_only=False) == [
        ["pkg.a", "pkg.b", "pkg.c"],
        ["pkg.d", "pkg.e"],
        ["pkg.f"],
    ]


def test_what_counts_as_an_import(tmp_path: Path) -> None:
    package = _write(
        tmp_path,
        {
            "__init__.py": "from pkg.sub import mod\n",
            "sub/__init__.py": "from . import mod\nfrom .mod import name\n",
            "sub/mod.py": """\
                from __future__ import annotations
                import json
                from typing import TYPE_CHECKING
                from ..top import helper
                if TYPE_CHECKING:
                    from pkg.typed import T
                else:
                    from pkg import runs
                try:
                    import pkg.tried
                except ImportError:
                    pass
                class C:
                    from pkg import in_class
                    def method(self):
                        from pkg.lazy import x
                        return lambda: __import__("json")
                """,
            "top.py": "",
            "named.py": """\
                import importlib
                HOT = ("pkg.top", "pkg.lazy", "json")
                def warm():
                    for name in HOT:
                        importlib.import_module(name)
                """,
            "just_a_string.py": 'LOGGER = "pkg.top"\n',  # no import_module: no import
            "typed.py": "",
            "runs.py": "",
            "tried.py": "",
            "in_class.py": "",
            "lazy.py": "",
            "native.pyx": """\
                \"\"\"A compiled module.
                from the docs: a line of prose that starts like an import
                \"\"\"
                from libc.stdint cimport uint64_t
                from pkg.top import (
                    helper,
                    other,
                )
                cdef f():
                    from pkg.lazy import x
                """,
        },
    )
    assert _edges(package) == {
        ("pkg", "pkg.sub.mod", True),  # from a package, a module by its name
        ("pkg.sub", "pkg.sub.mod", True),  # relative, from the package itself
        ("pkg.sub.mod", "pkg.top", True),  # two dots: the parent package
        ("pkg.sub.mod", "pkg.runs", True),  # the else of TYPE_CHECKING runs
        ("pkg.sub.mod", "pkg.tried", True),
        ("pkg.sub.mod", "pkg.in_class", True),  # a class body runs at import
        ("pkg.sub.mod", "pkg.lazy", False),
        ("pkg.named", "pkg.top", False),  # by name, in a function
        ("pkg.named", "pkg.lazy", False),
        ("pkg.native", "pkg.top", True),
        ("pkg.native", "pkg.lazy", False),
    }


def test_upward_imports_against_a_layer_table(tmp_path: Path) -> None:
    package = _write(
        tmp_path,
        {
            "__init__.py": "",
            "low.py": "from pkg.high import x\ndef f():\n    from pkg.mid import special\n",
            "mid/__init__.py": "from pkg import low\n",
            "mid/special.py": "from pkg.high import y\n",
            "high.py": "from pkg import low\nfrom pkg.mid import special\n",
            "stray.py": "",
        },
    )
    table = [
        Layer("low", ("pkg.low",)),
        Layer("mid", ("pkg.mid",)),
        Layer("high", ("pkg.high", "pkg.mid.special")),  # the longer name wins
    ]
    modules, edges = scan(package)
    assert unassigned(modules, table) == ["pkg", "pkg.stray"]
    assert [(e.importer, e.imported, e.top) for e in upward(edges, table)] == [
        ("pkg.low", "pkg.high", True),
        ("pkg.low", "pkg.mid.special", False),
    ]
    assert layer_index("pkg.mid.other", table) == 1
    assert layer_index("pkg.middle", table) is None  # a prefix of a name, not a package
