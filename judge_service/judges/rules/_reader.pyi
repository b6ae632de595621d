# The compiled reader's types (_reader.pyx); it equals reader.PythonReader.
from collections.abc import Callable, Iterable, Iterator
from fractions import Fraction

import sympy

from judge_service.judges.rules.claims import Link
from judge_service.judges.rules.reader import Finding, LinkKinds

def numbers(text: str) -> list[str]: ...
def normal(expression: str) -> str: ...

class Reader:
    @property
    def findings(self) -> list[Finding]: ...
    @property
    def errors(self) -> dict[sympy.Expr | int, list[sympy.Expr | int]]: ...
    @property
    def tainted(self) -> set[sympy.Expr | int]: ...
    @property
    def tainted_numbers(self) -> set[int | Fraction]: ...
    @property
    def claims(self) -> set[tuple[str, sympy.Expr | int]]: ...
    @property
    def rechecks(self) -> dict[tuple[int | Fraction, ...], int]: ...
    def read_lines(
        self,
        lines: Iterable[tuple[int, int, list[tuple[int, int, str]]]],
        links_of: Callable[[int], list[Link]],
        repeated_flags: Iterator[bool],
        kinds: LinkKinds | None = None,
    ) -> None: ...
    def read_text_lines(
        self,
        text: str,
        starts: list[int],
        lines: Iterable[tuple[int, int, list[tuple[int, int, str]]]],
        repeated_flags: Iterator[bool],
        kinds: LinkKinds | None = None,
    ) -> None: ...
    def read_line(
        self,
        base: int,
        links: list[Link],
        sentences: list[tuple[int, int, str]],
        repeated_flags: Iterator[bool],
    ) -> None: ...
