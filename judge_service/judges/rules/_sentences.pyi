# The compiled scanners' types (_sentences.pyx); each equals its Python definition.
from collections.abc import Sequence

def sentences(line: str) -> list[tuple[int, int, str]]: ...
def line_sentences(text: str) -> list[tuple[int, int, list[tuple[int, int, str]]]]: ...
def sentence_units(
    sentences: Sequence[str],
    min_chars: int,
    min_words: int,
    probes_per_lookup: int,
    base_probes: int,
) -> tuple[list[int], list[int], bytes, list[int], int] | None: ...
