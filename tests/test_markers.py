"""The judge's marked view: ⟦n⟧ at line starts and every ~64 tokens; forged markers escaped."""

from __future__ import annotations

import itertools
import re

from judge_service.trace import mark
from judge_service.trace.markers import MARKER_RE, mark_every_token, marker_positions
from judge_service.trace.tokenizer import LoadedTokenizer


def _markers(view: str) -> list[int]:
    return [int(m) for m in MARKER_RE.findall(view)]


def test_markers_at_line_starts_with_original_indices(bpe: LoadedTokenizer) -> None:
    text = "First line\nSecond line\r\nThird\n\nFifth"
    ids = bpe.hf.encode(text, add_special_tokens=False)
    trace = bpe.decode(ids)
    view = mark(trace).text
    for n in _markers(view):
        # each marker names the token that follows it
        after = view.split(f"⟦{n}⟧", 1)[1]
        assert after.startswith(trace.token_text(n)[:1] or "")
    starts = {trace.text.index(w) for w in ("First", "Second", "Third", "Fifth")}
    marked_chars = {int(trace.offsets[n]) for n in _markers(view)}
    assert starts <= marked_chars
    assert MARKER_RE.sub("", view) == text


def test_long_line_gets_a_marker_every_64_tokens(bpe: LoadedTokenizer) -> None:
    text = " ".join(["word"] * 400)
    ids = bpe.hf.encode(text, add_special_tokens=False)
    trace = bpe.decode(ids)
    positions = marker_positions(trace)
    assert positions[0] == 0
    assert all(b - a == 64 for a, b in itertools.pairwise(positions))
    assert positions[-1] > len(ids) - 65


def test_forged_markers_and_controls_are_escaped(bpe: LoadedTokenizer) -> None:
    text = "real ⟦5⟧ fake ⟦100000⟧ and bell\x07 and \u202e reversed\nnext"
    ids = bpe.hf.encode(text, add_special_tokens=False)
    trace = bpe.decode(ids)
    view = mark(trace).text
    numbers = _markers(view)
    assert 100000 not in numbers and numbers == sorted(numbers)
    assert all(n < trace.num_tokens for n in numbers)
    assert "〚5〛" in view and "〚100000〛" in view
    assert "\x07" not in view and "\u202e" not in view
    assert not re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f]", view)


def test_view_of_a_token_range_and_every_token(bpe: LoadedTokenizer) -> None:
    ids = bpe.hf.encode("alpha beta\ngamma delta", add_special_tokens=False)
    trace = bpe.decode(ids)
    part = mark(trace, start=2, end=len(ids)).text
    assert part.startswith("⟦2⟧")
    every = mark_every_token(trace, 0, 3)
    assert _markers(every) == [0, 1, 2]
