"""Exact decoding of non-byte-level tokenizers from a table of per-id pieces.

A `tokenizers` decoder pipeline is a list of steps over the token strings. For the
pipelines SentencePiece-style, Metaspace and WordPiece tokenizers ship, every step
but two is a function of one token alone, so each id's decoded piece can be computed
once, at load:

* ``Replace`` (string pattern) steps, then ``ByteFallback``, then ``Fuse``, then
  ``Strip`` of leading spaces (Llama 2, Mistral, Gemma): a ``<0xXX>`` token is one
  byte; a run of them decodes as UTF-8 if the whole run is valid and to one U+FFFD
  per byte otherwise (as `tokenizers` does); ``Strip`` removes up to n leading
  spaces of the whole text, which the first tokens' ranges lose;
* ``Metaspace``: the replacement char becomes a space, except in the first token,
  where it is dropped;
* ``WordPiece``: a ``##`` piece joins its neighbour, any other is preceded by a
  space, except the first; the cleanup rules act on each token alone.

A trace is then one join plus numpy bookkeeping, and each token owns the chars its
piece adds: a character split across byte tokens belongs to the byte that completes
it, the others own an empty range. Ids are never re-tokenized. Any other pipeline
(or a tokenizer whose Python class overrides decoding) gets no table, and the caller
keeps its generic decoder.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from judge_service.trace.decode import Trace

log = logging.getLogger(__name__)

_REPLACEMENT = "\ufffd"
# `u8::from_str_radix(&token[3..5], 16)`: two hex digits, or a plus sign and one.
_BYTE_DIGITS = re.compile(r"\+?[0-9A-Fa-f]{1,2}")
# The WordPiece decoder's cleanup, in its order (tokenizers' `wordpiece::cleanup`).
_CLEANUP = (
    (" .", "."),
    (" ?", "?"),
    (" !", "!"),
    (" ,", ","),
    (" ' ", "'"),
    (" n't", "n't"),
    (" 'm", "'m"),
    (" do not", " don't"),
    (" 's", "'s"),
    (" 've", "'ve"),
    (" 're", "'re"),
)
# Ids decoded at load to check the table against the tokenizer's own decode.
_CHECK_IDS = 16_384
_CHECK_CHUNK = 256


def _byte_of(token: str) -> int:
    """The byte a ``<0xXX>`` token stands for under ``ByteFallback``, else -1."""
    if not token.startswith("<0x") or not token.endswith(">") or len(token.encode()) != 6:
        return -1
    digits = token[3:5]
    return int(digits, 16) if _BYTE_DIGITS.fullmatch(digits) else -1


def _cleanup(text: str) -> str:
    for old, new in _CLEANUP:
        text = text.replace(old, new)
    return text


class PieceTable:
    """Per id, its decoded piece (``""`` for a byte token) and the rules for the rest."""

    def __init__(
        self,
        tokens: list[str | None],
        later: Callable[[str], str],
        first: Callable[[str], str] | None,
        *,
        byte_fallback: bool,
        strip: tuple[str, int] | None,
    ) -> None:
        self._tokens = tokens
        self._first = first
        self._strip = strip
        values = [_byte_of(t) if byte_fallback and t is not None else -1 for t in tokens]
        self._byte_value: npt.NDArray[np.int16] | None = None
        if byte_fallback and any(v >= 0 for v in values):
            self._byte_value = np.array(values, np.int16)
        self._pieces = [
            "" if t is None or v >= 0 else later(t) for t, v in zip(tokens, values, strict=True)
        ]
        self._lengths = np.array([len(p) for p in self._pieces], np.int64)
        known = np.array([t is not None for t in tokens], np.bool_)
        # A hole (an id with no token) is dropped by the tokenizer before the decoder
        # runs, which shifts "the first token": such traces go to the generic decoder.
        self._known: npt.NDArray[np.bool_] | None = None if known.all() else known

    def decode(self, ids: npt.NDArray[np.int64]) -> Trace | None:
        """The trace of in-range `ids`, or None where they hold an id with no token."""
        if self._known is not None and not self._known[ids].all():
            return None
        if ids.shape[0] == 0:
            return Trace(ids, "", np.zeros(1, np.int64))
        ids_list = ids.tolist()
        table = self._pieces
        pieces = [table[i] for i in ids_list]
        lengths = self._lengths[ids]
        if self._first is not None:
            token = self._tokens[ids_list[0]]
            assert token is not None
            pieces[0] = self._first(token)
            lengths[0] = len(pieces[0])
        if self._byte_value is not None:
            values = self._byte_value[ids]
            at = np.flatnonzero(values >= 0)
            if at.size:
                _fill_bytes(pieces, lengths, at, values[at].astype(np.uint8))
        text = "".join(pieces)
        ends = np.cumsum(lengths)
        if self._strip is not None:
            content, most = self._strip
            cut = 0
            while cut < most and cut < len(text) and text[cut] == content:
                cut += 1
            if cut:
                text = text[cut:]
                ends = np.maximum(ends - cut, 0)
        offsets = np.zeros(ids.shape[0] + 1, np.int64)
        offsets[1:] = ends
        return Trace(ids, text, offsets)


def _fill_bytes(
    pieces: list[str],
    lengths: npt.NDArray[np.int64],
    at: npt.NDArray[np.intp],
    values: npt.NDArray[np.uint8],
) -> None:
    """Give each byte token (at positions `at`) the char it completes, in place.

    `tokenizers` decodes a run of byte tokens as a whole: to its text if the run is
    valid UTF-8, else to one U+FFFD per byte.
    """
    run_start = np.ones(at.shape[0], np.bool_)
    run_start[1:] = np.diff(at) != 1
    run_id = np.cumsum(run_start) - 1
    # All runs in one buffer, a NUL after each: a run decodes there as it would
    # alone (a cut-short char meets the NUL, and the decoder restarts after it).
    where = np.arange(at.shape[0]) + run_id
    buf = np.zeros(at.shape[0] + int(run_id[-1]) + 1, np.uint8)
    buf[where] = values
    # surrogateescape turns each byte of an invalid sequence into one lone surrogate
    # (one char for one byte), so the chars' UTF-8 lengths say which bytes end a
    # char and which were invalid, without a loop over the runs.
    text = buf.tobytes().decode("utf-8", "surrogateescape")
    points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
    escaped = (points >= 0xDC80) & (points <= 0xDCFF)
    sizes = 1 + (points >= 0x80) + (points >= 0x800) + (points >= 0x10000)
    sizes[escaped] = 1
    char_ends = np.cumsum(sizes) - 1
    char_at = np.full(buf.shape[0], -1, np.int64)
    char_at[char_ends] = np.arange(points.shape[0])
    invalid = np.zeros(buf.shape[0], np.bool_)
    invalid[char_ends[escaped]] = True
    bad_run = np.bincount(run_id, weights=invalid[where]) > 0
    bad = bad_run[run_id]
    index = char_at[where]
    completes = (index >= 0) & ~bad
    lengths[at] = completes | bad
    for position in at[bad].tolist():
        pieces[position] = _REPLACEMENT
    for position, k in zip(at[completes].tolist(), index[completes].tolist(), strict=True):
        pieces[position] = text[k]


def _steps(decoder: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    if not decoder:
        return None
    if decoder.get("type") != "Sequence":
        return [decoder]
    flat: list[dict[str, Any]] = []
    for step in decoder.get("decoders") or []:
        inner = _steps(step)
        if inner is None:
            return None
        flat.extend(inner)
    return flat


def _rules(
    steps: list[dict[str, Any]],
) -> tuple[Callable[[str], str], Callable[[str], str] | None, bool, tuple[str, int] | None] | None:
    """(piece of a later token, piece of the first, byte fallback, strip) for a
    pipeline this module reproduces exactly; None for any other."""
    kinds = [step.get("type") for step in steps]
    if kinds == ["Metaspace"]:
        replacement = steps[0].get("replacement")
        scheme = steps[0].get("prepend_scheme")
        if not isinstance(replacement, str) or scheme not in ("always", "first", "never"):
            return None

        def spaced(token: str) -> str:
            return token.replace(replacement, " ")

        def dropped(token: str) -> str:
            return token.replace(replacement, "")

        return spaced, (None if scheme == "never" else dropped), False, None
    if kinds == ["WordPiece"]:
        prefix, cleanup = steps[0].get("prefix"), steps[0].get("cleanup")
        if not isinstance(prefix, str) or not isinstance(cleanup, bool):
            return None
        tidy = _cleanup if cleanup else (lambda s: s)

        def joined(token: str) -> str:
            return tidy(token.replace(prefix, "", 1) if token.startswith(prefix) else " " + token)

        return joined, (lambda token: tidy(token)), False, None
    # SentencePiece style: Replace* ByteFallback? Fuse? Strip? (Strip only after Fuse,
    # where it acts on the whole text rather than on each token).
    replaces: list[tuple[str, str]] = []
    k = 0
    while k < len(steps) and kinds[k] == "Replace":
        pattern, content = steps[k].get("pattern") or {}, steps[k].get("content")
        old = pattern.get("String") if isinstance(pattern, dict) else None
        if not isinstance(old, str) or not old or not isinstance(content, str):
            return None
        replaces.append((old, content))
        k += 1
    byte_fallback = k < len(steps) and kinds[k] == "ByteFallback"
    k += byte_fallback
    fused = k < len(steps) and kinds[k] == "Fuse"
    k += fused
    strip: tuple[str, int] | None = None
    if fused and k < len(steps) and kinds[k] == "Strip":
        content, start, stop = (steps[k].get(key) for key in ("content", "start", "stop"))
        if not isinstance(content, str) or len(content) != 1 or stop != 0:
            return None
        if not isinstance(start, int) or start < 0:
            return None
        strip = (content, start) if start else None
        k += 1
    if k != len(steps) or not (replaces or byte_fallback):
        return None

    def replaced(token: str) -> str:
        for old, new in replaces:
            token = token.replace(old, new)
        return token

    return replaced, None, byte_fallback, strip


def _decodes_through_backend(hf: Any) -> bool:
    """Whether `hf.decode` is the backend's decode and nothing more (no subclass
    override), so that reproducing the backend's decoder reproduces `hf.decode`."""
    try:
        from transformers.tokenization_utils_base import PreTrainedTokenizerBase
        from transformers.tokenization_utils_tokenizers import TokenizersBackend
    except ImportError:
        return False
    cls = type(hf)
    return (
        isinstance(hf, TokenizersBackend)
        and cls._decode is TokenizersBackend._decode
        and cls.decode is PreTrainedTokenizerBase.decode
    )


def build_piece_table(hf: Any, vocab_size: int) -> PieceTable | None:
    """The piece table of a `transformers` tokenizer, or None where its decoder is not
    one this module reproduces exactly (checked against `hf.decode` on a sample)."""
    backend = getattr(hf, "backend_tokenizer", None)
    if backend is None or not _decodes_through_backend(hf):
        return None
    steps = _steps(json.loads(backend.to_str()).get("decoder"))
    rules = _rules(steps) if steps is not None else None
    if rules is None:
        return None
    later, first, byte_fallback, strip = rules
    tokens: list[str | None] = [backend.id_to_token(i) for i in range(vocab_size)]
    table = PieceTable(tokens, later, first, byte_fallback=byte_fallback, strip=strip)
    if not _agrees(table, hf, vocab_size):
        log.warning("piece table for %s disagrees with its decode; not used", type(hf).__name__)
        return None
    return table


def _agrees(table: PieceTable, hf: Any, vocab_size: int) -> bool:
    # A guard against a decoder rule this module gets wrong: a seeded sample of the
    # vocabulary, in chunks, must decode to the tokenizer's own text.
    everything = np.arange(vocab_size, dtype=np.int64)
    if table._known is not None:
        everything = everything[table._known]
    ids = np.random.default_rng(0).permutation(everything)[:_CHECK_IDS].tolist()
    for a in range(0, len(ids), _CHECK_CHUNK):
        chunk = ids[a : a + _CHECK_CHUNK]
        trace = table.decode(np.asarray(chunk, np.int64))
        expected = hf.decode(chunk, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if trace is None or trace.text != expected:
            return False
    return True
