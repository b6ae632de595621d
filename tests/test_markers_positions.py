"""Marker positions match a token-by-token walk: a marker at each line's first token, then
every `every` tokens until the next line."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judge_service.trace import markers
from judge_service.trace.decode import Trace
from judge_service.trace.markers import marker_array, marker_positions


def _trace(text: str, cuts: list[int], empties: list[int]) -> Trace:
    """`text` cut into tokens at `cuts`, with an empty-range token before each char in
    `empties` (the leading bytes of a character split across byte-level tokens)."""
    bounds = sorted({0, len(text), *(c for c in cuts if 0 < c < len(text))})
    offsets = [0]
    for bound in bounds[1:]:
        offsets.extend([offsets[-1]] * empties.count(offsets[-1]))
        offsets.append(bound)
    array = np.array(offsets, np.int64)
    return Trace(np.zeros(array.shape[0] - 1, np.int64), text, array)


def _walk(trace: Trace, every: int) -> list[int]:
    """The positions one token at a time: a token starts a line when it is the first whose
    range begins at or after the char following a newline."""
    n = trace.num_tokens
    offsets = trace.offsets.tolist()
    after_newlines = [i + 1 for i, char in enumerate(trace.text) if char == "\n"]
    line_starts = {next((t for t in range(n) if offsets[t] >= c), n) for c in after_newlines}
    positions, since = [], 0
    for token in range(n):
        since = 0 if token == 0 or token in line_starts else since + 1
        if since % every == 0:
            positions.append(token)
    return positions


_PIECES = ["a", "bc ", "\n", "\n\n", "\r\n", "数", "𝔸", "⟦1⟧", " "]
_TEXT = st.lists(st.sampled_from(_PIECES), max_size=60).map("".join)


@settings(max_examples=300, deadline=None)
@given(
    text=_TEXT,
    cuts=st.lists(st.integers(0, 200), max_size=120),
    empties=st.lists(st.integers(0, 200), max_size=10),
    every=st.sampled_from([1, 2, 3, 5, 64]),
    short=st.booleans(),
)
def test_positions_match_a_token_walk(
    text: str, cuts: list[int], empties: list[int], every: int, short: bool
) -> None:
    """Both ways of finding them: plain Python below markers._SHORT, numpy above (forced
    here by a limit of 0)."""
    trace = _trace(text, cuts, empties)
    with mock.patch.object(markers, "_SHORT", markers._SHORT if short else 0):
        positions = marker_positions(trace, every)
        assert positions == _walk(trace, every)
        array = marker_array(trace, every)
    assert array.dtype == np.int64 and not array.flags.writeable


def test_no_tokens_no_markers_and_a_bad_spacing() -> None:
    assert marker_positions(_trace("", [], []), 64) == []
    trace = _trace("one\ntwo", [2, 4], [])
    assert marker_positions(trace, -3) == []  # as range() with a negative step
    with pytest.raises(ValueError, match="zero"):
        marker_positions(trace, 0)
