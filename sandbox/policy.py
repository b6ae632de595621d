"""The restricted environment untrusted code runs in: builtins, guards, modules.

RestrictedPython rewrites attribute access, subscripts, iteration, printing,
in-place operators and star-calls into calls of guard functions the host
provides (``_getattr_``, ``_write_``, ``_print_``, ...). This module provides
them. The guards are a filter, not the boundary: what gets past them still
runs in a confined child (see `sandbox.isolation`).

Allowed modules are handed over as read-only views holding only their public,
non-module attributes, because the real modules leak others
(``fractions.sys.modules['os']`` needs no underscore). ``sympy`` cannot be
filtered like that (``sympy.sympify`` evaluates strings with ``eval``), so it
is handed over whole, and only when the OS layer holds.
"""

from __future__ import annotations

import builtins
import functools
import importlib
import operator
import sys
from collections.abc import Callable
from types import BuiltinFunctionType, FunctionType, MethodType, ModuleType
from typing import Any

from RestrictedPython.Guards import (
    guarded_iter_unpack_sequence,
    guarded_unpack_sequence,
    safe_builtins,
)
from RestrictedPython.transformer import INSPECT_ATTRIBUTES

from sandbox.errors import Forbidden, OutputLimit

ALLOWED_MODULES = ("math", "cmath", "fractions", "decimal", "itertools", "functools", "statistics")
ISOLATED_ONLY_MODULES = ("sympy",)
SANDBOX_MODULE_NAME = "sandbox_code"

_EXTRA_BUILTINS = (
    "list", "tuple", "dict", "set", "frozenset", "sorted", "reversed", "zip", "enumerate",
    "map", "filter", "sum", "min", "max", "any", "all", "iter", "next", "bin", "format",
    "bytes", "bytearray", "object", "NotImplemented",
)  # fmt: skip
# RestrictedPython leaves these out because they iterate in C past `_getiter_`;
# our `_getiter_` guards nothing (there are no security proxies here), so they
# lose nothing.

_UNSAFE_STR_METHODS = frozenset({"format", "format_map"})

# Builtins that are left out on purpose; calling one says so (a NameError would
# read like a typo).
_WITHHELD = (
    "open", "input", "eval", "exec", "compile", "globals", "locals", "vars", "dir", "type",
    "super", "memoryview", "breakpoint", "help", "exit", "quit", "delattr",
)  # fmt: skip


class ModuleView:
    """A read-only module: its public, non-module attributes only."""

    __slots__ = ("_attrs", "_name")

    def __init__(self, module: ModuleType) -> None:
        attrs = {}
        for name in dir(module):
            if name.startswith("_"):
                continue
            value = getattr(module, name)
            if not isinstance(value, ModuleType):
                attrs[name] = value
        object.__setattr__(self, "_name", module.__name__)
        object.__setattr__(self, "_attrs", attrs)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._attrs[name]
        except KeyError:
            raise AttributeError(f"module {self._name!r} has no attribute {name!r}") from None

    def __setattr__(self, name: str, value: object) -> None:
        raise Forbidden(f"module {self._name!r} is read-only")

    def __dir__(self) -> list[str]:
        return sorted(self._attrs)

    def __repr__(self) -> str:
        return f"<module {self._name!r}>"


class OutputBuffer:
    """Collects printed text up to a cap, then raises OutputLimit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.truncated = False

    def write(self, text: str) -> None:
        room = self.limit - self.size
        if len(text) > room:
            self.parts.append(text[:room])
            self.size = self.limit
            self.truncated = True
            raise OutputLimit(f"the output passed its limit of {self.limit} characters")
        self.parts.append(text)
        self.size += len(text)

    @property
    def text(self) -> str:
        return "".join(self.parts)


class _Printer:
    """What RestrictedPython's ``print(...)`` rewriting calls (``_print_``)."""

    def __init__(self, buffer: OutputBuffer) -> None:
        self._buffer = buffer

    def _call_print(self, *objects: object, **kwargs: Any) -> None:
        if kwargs.pop("file", None) is not None:
            raise Forbidden("print(file=...) is not available; print to stdout")
        print(*objects, **kwargs, file=self._buffer)

    def __call__(self) -> str:
        return self._buffer.text


def guarded_getattr(obj: object, name: str, *default: object) -> Any:
    if type(name) is not str:
        raise TypeError("attribute name must be a string")
    if name.startswith("_") or name in INSPECT_ATTRIBUTES:
        raise Forbidden(f"access to attribute {name!r} is not allowed")
    if name in _UNSAFE_STR_METHODS and (
        isinstance(obj, str) or (isinstance(obj, type) and issubclass(obj, str))
    ):
        raise Forbidden(f"str.{name} is not available (it can reach attributes); use f-strings")
    return getattr(obj, name, *default)


def guarded_hasattr(obj: object, name: str) -> bool:
    try:
        guarded_getattr(obj, name)
    except AttributeError:
        return False
    return True


def _is_sandbox_class(obj: object) -> bool:
    return isinstance(obj, type) and getattr(obj, "__module__", None) == SANDBOX_MODULE_NAME


def guarded_write(obj: Any) -> Any:
    """Allow writes to data, refuse monkey-patching of modules, classes and functions.

    Each call runs in a fresh child, so writes cannot leak into other calls;
    this guard only keeps code from rewiring what the guards themselves use.
    """
    shared = (ModuleType, ModuleView, type, FunctionType, BuiltinFunctionType, MethodType)
    if isinstance(obj, shared) and not _is_sandbox_class(obj):
        raise Forbidden(f"cannot modify {type(obj).__name__} objects")
    return obj


def guarded_setattr(obj: object, name: str, value: object) -> None:
    if type(name) is not str or name.startswith("_"):
        raise Forbidden(f"cannot set attribute {name!r}")
    setattr(guarded_write(obj), name, value)


_INPLACE: dict[str, Callable[[Any, Any], Any]] = {
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow,
    "<<=": operator.ilshift, ">>=": operator.irshift, "&=": operator.iand,
    "|=": operator.ior, "^=": operator.ixor, "@=": operator.imatmul,
}  # fmt: skip


def _inplacevar(op: str, target: Any, value: Any) -> Any:
    try:
        return _INPLACE[op](target, value)
    except KeyError:
        raise Forbidden(f"operator {op} is not available") from None


def _withheld(name: str) -> Callable[..., Any]:
    def refuse(*args: object, **kwargs: object) -> Any:
        raise Forbidden(f"{name}() is not available in the sandbox")

    return refuse


def _apply(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return func(*args, **kwargs)


@functools.cache
def _module_views() -> dict[str, ModuleView]:
    # Built once in the zygote; each call's child gets them by fork.
    return {name: ModuleView(importlib.import_module(name)) for name in ALLOWED_MODULES}


class Importer:
    """``__import__`` for untrusted code: views of the allowed modules, sympy when isolated."""

    def __init__(self, *, sympy_reason: str | None) -> None:
        self.views = _module_views()
        self.sympy_reason = sympy_reason  # None: sympy is allowed

    def __call__(
        self,
        name: str,
        globals: object = None,
        locals: object = None,
        fromlist: tuple[str, ...] | None = (),
        level: int = 0,
    ) -> object:
        if level != 0:
            raise Forbidden("relative imports are not available")
        top = name.partition(".")[0]
        if top in self.views:
            if name != top:
                raise Forbidden(f"module {name!r} is not available")
            return self.views[top]
        if top in ISOLATED_ONLY_MODULES:
            if self.sympy_reason is not None:
                raise Forbidden(f"{top} is not available here: {self.sympy_reason}")
            module = importlib.import_module(name)
            return module if fromlist else sys.modules[top]
        available = ", ".join(self.available())
        raise Forbidden(f"import of {name!r} is not allowed; available modules: {available}")

    def available(self) -> list[str]:
        extra = list(ISOLATED_ONLY_MODULES) if self.sympy_reason is None else []
        return [*ALLOWED_MODULES, *extra]


def make_globals(buffer: OutputBuffer, importer: Importer) -> dict[str, Any]:
    """A fresh global namespace for one run."""
    names = dict(safe_builtins)
    for name in _EXTRA_BUILTINS:
        names[name] = getattr(builtins, name)
    names.update(
        {
            "__import__": importer,
            "getattr": guarded_getattr,
            "hasattr": guarded_hasattr,
            "setattr": guarded_setattr,
        }
    )
    for name in _WITHHELD:
        names[name] = _withheld(name)
    return {
        "__builtins__": names,
        "__name__": SANDBOX_MODULE_NAME,
        "__metaclass__": type,
        "_getattr_": guarded_getattr,
        "_getitem_": operator.getitem,
        "_getiter_": iter,
        "_iter_unpack_sequence_": guarded_iter_unpack_sequence,
        "_unpack_sequence_": guarded_unpack_sequence,
        "_write_": guarded_write,
        "_inplacevar_": _inplacevar,
        "_apply_": _apply,
        "_print_": lambda _getattr=None: _Printer(buffer),
    }
