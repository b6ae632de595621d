# The compiled near-duplicate words' types (_words.pyx); it equals its Python definition.
from collections.abc import Sequence

def sentence_units(
    sentences: Sequence[str],
    min_chars: int,
    min_words: int,
    probes_per_lookup: int,
    base_probes: int,
) -> tuple[list[int], list[int], bytes, list[int], int] | None: ...
