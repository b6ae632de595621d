"""judge_service's layers, lowest first, and the imports allowed to run up them.

    python -m judge_service.devtools.layers              # cycles, upward imports, counts
    python -m judge_service.devtools.layers --write      # ARCHITECTURE.md's Layers section
    python -m judge_service.devtools.layers --check      # exit 1 when it is out of date

(--write and --check need a checkout: ARCHITECTURE.md is not in the wheel.)

A module may import its own layer and the ones below it; an import into a higher layer
is *upward* and must be in ``ALLOWED`` with its reason. ``tests/test_layers.py`` holds
the code to both (and to no top-level import cycle), and ARCHITECTURE.md's section is
rendered from these tables, so the picture cannot drift from what is checked.
The graph is read by ``imports.py`` (its docstring says what counts as an import).
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from judge_service.devtools.imports import Import, Layer, cycles, scan, unassigned, upward

PACKAGE = "judge_service"
ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT.parent / "ARCHITECTURE.md"
BEGIN = "<!-- layers: rendered by python -m judge_service.devtools.layers --write -->"
END = "<!-- layers: end -->"

# The line reader: a line's claims and links, the reader over them and the final-answer
# check. The rules judge and grounding both read through it; it imports neither.
_LINE_READER = tuple(
    f"judges.rules.{name}"
    for name in (
        *("links", "exact", "arithmetic", "algebra", "units", "forms", "plain_claims"),
        *("_plain", "claims", "_lines", "reader", "_reader", "final_answer"),
    )
)

# Members are dotted names under judge_service: a module, or a package and every module
# under it; the longest member that matches a module decides its layer. "__init__" is
# judge_service's own __init__ (the public API's re-exports) alone.
LAYERS: tuple[Layer, ...] = (
    Layer("readers", ("reading",)),
    Layer(
        "core",
        (
            *("bounds", "errors", "labels", "schemas", "client", "wire_json", "jsonl"),
            *("heap", "collector", "offload", "metrics", "buckets", "lazy_sympy"),
        ),
    ),
    Layer("store", ("store",)),
    Layer("config", ("config",)),
    Layer("trace", ("trace", "equivalence")),
    Layer("evaluation, probe", ("evaluation", "probe")),
    Layer("line reader", _LINE_READER),
    # judge_service/__init__ runs before any of its modules: it must stay this low.
    Layer(
        "spans, grounding",
        ("spans", "credit", "__init__", "folding", "grounding", "evidence_index"),
    ),
    # Below validation, so that judges/base.py cannot take validation back in (issue 39).
    Layer("judge interface, tools", ("judges", "judges.base", "judges.zero", "tools")),
    Layer("validation", ("validate",)),
    Layer("methods", ("methods",)),
    Layer("resolve", ("resolve",)),
    Layer("judges", ("judges.cache", "judges.rules", "judges.llm", "judges.registry")),
    Layer("alignment, group reading", ("alignment", "group")),
    Layer("results", ("judgment", "store.cache", "view", "drift")),
    Layer("pipeline", ("pipeline",)),
    Layer("group judging", ("group.cached", "group.judge", "group.batch")),
    Layer("jobs", ("jobs",)),
    Layer("api", ("api",)),
    Layer(
        "entry points",
        ("__main__", "cli", "integrations", "settings_doc", "devtools"),
    ),
)

# (importer, imported, "top" or "function") -> why it runs upward, one line each.
ALLOWED: dict[tuple[str, str, str], str] = {
    ("config.drift", "evaluation.records", "function"): (
        "the canary's record files, when set, are checked as the settings load, with"
        " eval's reader; in the validator, so config imports nothing above itself"
    ),
    **{
        ("heap", hot, "function"): (
            "the servers' startup freeze (a server's warm-up thread, after start) imports"
            " the hot path by name, so that gc.freeze() keeps it; belongs beside its"
            " callers, api/app.py and cli/worker.py"
        )
        for hot in ("judges.rules.rules_judge", "trace.tokenizer", "validate", "group.batch")
    },
}


def qualified(layers: Sequence[Layer]) -> list[Layer]:
    """The table with full module names (judge_service.…), as the checker reads them."""

    def full(member: str) -> str:
        return PACKAGE if member == "__init__" else f"{PACKAGE}.{member}"

    return [Layer(layer.name, tuple(full(m) for m in layer.members)) for layer in layers]


def short(module: str) -> str:
    return module.removeprefix(PACKAGE + ".") if module != PACKAGE else "__init__"


def key(edge: Import) -> tuple[str, str, str]:
    """An import's allow-list key."""
    return short(edge.importer), short(edge.imported), "top" if edge.top else "function"


@dataclass(frozen=True)
class Report:
    unassigned: list[str]  # modules no layer holds
    cycles: list[list[str]]  # top-level import cycles
    loops: list[list[str]]  # cycles closed by an import in a function as well
    upward: list[Import]  # every import into a higher layer
    stale: list[tuple[str, str, str]]  # allow-list entries no import needs any more

    @property
    def disallowed(self) -> list[Import]:
        return [edge for edge in self.upward if key(edge) not in ALLOWED]


def report(root: Path | None = None) -> Report:
    modules, edges = scan(root or ROOT, PACKAGE)
    layers = qualified(LAYERS)
    up = upward(edges, layers)
    used = {key(edge) for edge in up}
    stale = [entry for entry in ALLOWED if entry not in used]
    loops = cycles(edges, top_only=False)
    return Report(unassigned(modules, layers), cycles(edges), loops, up, stale)


def render() -> str:
    """ARCHITECTURE.md's Layers section, between its markers, from LAYERS and ALLOWED."""
    width = max(len(layer.name) for layer in LAYERS)
    rows = []
    for number, layer in reversed(list(enumerate(LAYERS, 1))):
        lines = textwrap.wrap(" ".join(layer.members), 88 - width - 6)
        rows.append(f"{number:2d}  {layer.name:<{width}}  {lines[0]}")
        rows += [" " * (width + 6) + line for line in lines[1:]]
    allowed = [
        f"| `{a}` | `{b}` | {where} | {why} |" for (a, b, where), why in sorted(ALLOWED.items())
    ]
    return "\n".join(
        [
            BEGIN,
            "",
            "Highest first; names are under `judge_service.` (a package holds the modules",
            "under it unless a longer name places one elsewhere; `__init__` is the package's",
            "own). A module imports its own layer and those below it.",
            "",
            "```",
            *rows,
            "```",
            "",
            "The imports that still run up a layer, and why:",
            "",
            "| importer | imports | where | why |",
            "|---|---|---|---|",
            *allowed,
            "",
            END,
        ]
    )


def replaced(document: str) -> str:
    """``document`` with the text between the markers (inclusive) rendered afresh."""
    start, end = document.index(BEGIN), document.index(END) + len(END)
    return document[:start] + render() + document[end:]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite ARCHITECTURE.md's section")
    mode.add_argument("--check", action="store_true", help="exit 1 if the section is stale")
    args = parser.parse_args(argv)
    if args.write or args.check:
        document = ARCHITECTURE.read_text(encoding="utf-8")
        fresh = replaced(document)
        if args.check:
            if fresh != document:
                print(f"{ARCHITECTURE.name}: the Layers section is out of date (--write)")
                return 1
            return 0
        ARCHITECTURE.write_text(fresh, encoding="utf-8")
        return 0
    found = report()
    for module in found.unassigned:
        print(f"no layer: {module}")
    for component in found.cycles:
        print("cycle: " + " ".join(short(m) for m in component))
    for component in found.loops:
        print("loop through a function import: " + " ".join(short(m) for m in component))
    for edge in found.upward:
        importer, imported, where = key(edge)
        mark = "allowed" if key(edge) in ALLOWED else "NOT ALLOWED"
        print(f"upward ({where}, {mark}): {importer}:{edge.line} -> {imported}")
    for entry in found.stale:
        print(f"stale allow-list entry: {entry}")
    top = sum(edge.top for edge in found.upward)
    print(
        f"{len(found.upward)} upward import(s) ({top} top-level,"
        f" {len(found.upward) - top} in functions), {len(found.cycles)} top-level cycle(s)"
    )
    bad = found.unassigned or found.cycles or found.disallowed or found.stale
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
