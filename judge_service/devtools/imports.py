"""A package's import graph read from its source (stdlib ``ast``, nothing imported), its
top-level import cycles, and the imports that run up a declared layer table.

    python -m judge_service.devtools.imports [ROOT]     # cycles and upward imports

What counts:

* a *module* is a ``.py`` file of the package (``__init__.py`` names its package) or a
  Cython ``.pyx`` file, whose import statements are read one by one (its ``cimport``s
  are compile-time and skipped);
* an import is *top-level* when it runs as its module is imported: at module level,
  in a class body, in a ``try``/``if`` there; it is a *function* import when it sits in
  a ``def`` (in a ``.pyx``, when it is indented). Imports under
  ``if TYPE_CHECKING:`` never run and are not counted;
* ``from P import name`` goes to ``P.name`` when that is a module of the package, else
  to ``P``; an import of ``P.Q.R`` is an edge to ``P.Q.R`` only (Python also runs the
  parents' ``__init__``, but a package importing its own children would otherwise count
  as a cycle with every child that imports a sibling through it);
* in a module that calls ``importlib.import_module`` (or ``__import__``), every string
  that is the full name of one of the package's modules counts as an import by name,
  in a function unless such a call runs at the top (a name built at run time, as
  ``f"{__name__}.{module}"``, is not seen);
* imports of modules outside the package are dropped.

A cycle is a strongly connected component (more than one module, or a module importing
itself) of the top-level edges: only those can meet a half-initialised module.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

__all__ = ["Import", "Layer", "cycles", "layer_index", "scan", "unassigned", "upward"]


@dataclass(frozen=True, order=True)
class Import:
    """One import statement's edge: ``importer`` imports ``imported`` at ``line``."""

    importer: str
    imported: str
    line: int
    top: bool  # runs when the importer is imported (False: inside a function)


@dataclass(frozen=True)
class Layer:
    """One layer: modules, or packages (every module under them), by dotted name."""

    name: str
    members: tuple[str, ...]


def _module_names(root: Path, package: str) -> dict[str, Path]:
    names: dict[str, Path] = {}
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".py", ".pyx") or "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join([package, *parts])] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _nodes(tree: ast.AST, in_function: bool = False) -> Iterator[tuple[ast.AST, bool]]:
    """Every node below ``tree`` that can run, with whether it sits in a function."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for other in node.orelse:  # the else branch does run
                yield other, in_function
                yield from _nodes(other, in_function)
            continue
        yield node, in_function
        inner = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        yield from _nodes(node, inner)


def _by_name(nodes: list[tuple[ast.AST, bool]], modules: Mapping[str, Path]) -> list[Import]:
    """Imports by a module's name: where a module calls ``import_module`` (or
    ``__import__``), each string in it that is the full name of one of the package's
    modules, as a function import unless a call runs at the top."""
    calls = [
        in_function
        for node, in_function in nodes
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__"))
            or (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
        )
    ]
    if not calls:
        return []
    return [
        Import("", node.value, node.lineno, not all(calls))
        for node, _ in nodes
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in modules
    ]


def _targets(
    node: ast.stmt, importer: str, is_package: bool, modules: Mapping[str, Path]
) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    assert isinstance(node, ast.ImportFrom)
    base = node.module or ""
    if node.level:
        # A relative import counts from the importer's package (a package's own
        # __init__ is that package).
        anchor = importer.split(".")
        if not is_package:
            anchor = anchor[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    out = []
    for alias in node.names:
        child = f"{base}.{alias.name}"
        out.append(child if child in modules else base)
    return out


def _pyx_tree(source: str) -> ast.Module:
    """The import statements of a Cython file as a Python tree: each ``import`` /
    ``from ... import`` statement (parentheses joined), indented ones put in a def."""
    body: list[ast.stmt] = []
    lines = source.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        start = i
        text = line.strip()
        i += 1
        if not text.startswith(("import ", "from ")) or " cimport " in text:
            continue
        while text.count("(") > text.count(")") and i < len(lines):
            text += " " + lines[i].strip()
            i += 1
        try:
            statement = ast.parse(text).body[0]
        except SyntaxError:  # prose in a docstring or comment that starts like one
            continue
        ast.increment_lineno(statement, start)
        if line[:1].isspace():
            holder = ast.parse("def _():\n    pass").body[0]
            assert isinstance(holder, ast.FunctionDef)
            holder.body = [statement]
            body.append(holder)
        else:
            body.append(statement)
    return ast.Module(body=body, type_ignores=[])


def scan(root: Path, package: str | None = None) -> tuple[list[str], list[Import]]:
    """The modules of the package at ``root`` and every import among them, sorted."""
    package = package or root.name
    files = _module_names(root, package)
    edges: set[Import] = set()
    for name, path in files.items():
        source = path.read_text(encoding="utf-8")
        tree = _pyx_tree(source) if path.suffix == ".pyx" else ast.parse(source, str(path))
        is_package = path.stem == "__init__"
        nodes = list(_nodes(tree))
        for node, in_function in nodes:
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for target in _targets(node, name, is_package, files):
                if target == package or target.startswith(package + "."):
                    edges.add(Import(name, _known(target, files), node.lineno, not in_function))
        edges.update(replace(edge, importer=name) for edge in _by_name(nodes, files))
    return sorted(files), sorted(edges)


def _known(target: str, modules: Mapping[str, Path]) -> str:
    """``target`` or, for a name the package does not have as a file (a compiled module
    given by a stub only), its nearest parent that it does."""
    while target not in modules and "." in target:
        target = target.rsplit(".", 1)[0]
    return target


def cycles(edges: Iterable[Import], top_only: bool = True) -> list[list[str]]:
    """The import cycles: strongly connected components (Tarjan's, iterative) of more
    than one module, or of one that imports itself; each sorted, then all. Only the
    top-level imports count unless ``top_only`` is False (then a loop closed by an import
    in a function counts too: it cannot fail at import, but it is still a tangle)."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        if edge.top or not top_only:
            graph.setdefault(edge.importer, set()).add(edge.imported)
            graph.setdefault(edge.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    found.append(sorted(component))
    return sorted(found)


def layer_index(module: str, layers: Sequence[Layer]) -> int | None:
    """The layer holding ``module``: the one with its longest matching member."""
    best: tuple[int, int] | None = None  # (member length, layer)
    for number, layer in enumerate(layers):
        for member in layer.members:
            if (module == member or module.startswith(member + ".")) and (
                best is None or len(member) > best[0]
            ):
                best = (len(member), number)
    return None if best is None else best[1]


def unassigned(modules: Iterable[str], layers: Sequence[Layer]) -> list[str]:
    """Modules no layer holds."""
    return [module for module in modules if layer_index(module, layers) is None]


def upward(edges: Iterable[Import], layers: Sequence[Layer]) -> list[Import]:
    """The imports from a lower layer into a higher one (first layer lowest)."""
    out = []
    for edge in edges:
        low, high = layer_index(edge.importer, layers), layer_index(edge.imported, layers)
        if low is not None and high is not None and high > low:
            out.append(edge)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Print the top-level cycles of the package at ROOT (default: judge_service)."""
    args = list(sys.argv[1:] if argv is None else argv)
    root = Path(args[0]) if args else Path(__file__).resolve().parent.parent
    _, edges = scan(root)
    found = cycles(edges)
    for component in found:
        print("cycle: " + " -> ".join(component))
    print(f"{len(found)} top-level import cycle(s) in {root.name}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
