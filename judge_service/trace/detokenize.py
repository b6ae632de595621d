"""Decoding a policy's ids into a `Trace` with its own tokenizer, without re-tokenizing.

Three decoders:

* byte-level BPE (GPT-2, Llama 3, Qwen, DeepSeek): every id maps to a fixed byte
  string, so the trace is one join plus vectorised UTF-8 bookkeeping;
* SentencePiece/Metaspace (with byte fallback) and WordPiece: a table of per-id
  pieces (`piece_table.py`), exact for the decoder pipelines it recognises;
* anything else: incremental decoding over a sliding window, as streaming
  detokenizers do, so that decoder rules that look at neighbours stay exact.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from judge_service.errors import TokenIdError
from judge_service.trace.decode import Trace
from judge_service.trace.piece_table import PieceTable, build_piece_table

try:  # the compiled gather (_bytes.pyx), where the install could build it
    from judge_service.trace._bytes import gather as _gather
except ImportError:  # pragma: no cover - a build without a C compiler
    _gather = None  # type: ignore[assignment]

_REPLACEMENT = "\ufffd"


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """Inverse of GPT-2's ``bytes_to_unicode``: printable stand-in char -> byte."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    byte_values = printable[:]
    chars = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in byte_values:
            byte_values.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(byte_values, chars, strict=True)}


# Above this many ids the byte-level text is gathered with array steps (`_joined`);
# below it, joining the pieces costs less than the steps' fixed cost.
_GATHER_FROM = 256
_GATHER_CHUNK = 4096


class LoadedTokenizer:
    """A tokenizer loaded through `transformers`, with a decoder that yields char ranges."""

    def __init__(self, name: str, hf_tokenizer: Any) -> None:
        self.name = name
        self.hf = hf_tokenizer
        self.vocab_size = len(hf_tokenizer)
        self._byte_table: list[bytes | None] | None = None
        self._byte_lengths: npt.NDArray[np.int64] | None = None
        self._byte_blob: npt.NDArray[np.uint8] = np.zeros(0, np.uint8)
        self._byte_starts: npt.NDArray[np.int64] = np.zeros(0, np.int64)
        self._known: npt.NDArray[np.bool_] | None = None
        self._build_byte_table()
        self._pieces: PieceTable | None = None
        if self._byte_table is None:
            self._pieces = build_piece_table(hf_tokenizer, self.vocab_size)

    @property
    def byte_level(self) -> bool:
        return self._byte_table is not None

    @property
    def decoder_kind(self) -> str:
        """Which decoder `decode` uses: "byte-level", "piece-table" or "incremental"."""
        if self._byte_table is not None:
            return "byte-level"
        return "piece-table" if self._pieces is not None else "incremental"

    def _build_byte_table(self) -> None:
        backend = getattr(self.hf, "backend_tokenizer", None)
        if backend is None:
            return
        decoder = json.loads(backend.to_str()).get("decoder") or {}
        if decoder.get("type") != "ByteLevel":
            return
        byte_decoder = _byte_decoder()
        added = {i: tok.content for i, tok in self.hf.added_tokens_decoder.items()}
        pieces = self.hf.convert_ids_to_tokens(list(range(self.vocab_size)))
        table: list[bytes | None] = []
        for index, piece in enumerate(pieces):
            if index in added:
                table.append(added[index].encode("utf-8"))
            elif piece is None:
                table.append(None)
            else:
                try:
                    table.append(bytes(byte_decoder[c] for c in piece))
                except KeyError:
                    return  # not a pure byte-level vocabulary: use the generic decoder
        self._byte_table = table
        self._byte_lengths = np.array([len(b) if b is not None else 0 for b in table], np.int64)
        # The table as one array of bytes, each id's piece at `_byte_starts[id]`: a long
        # trace's text is gathered from it in a few array steps (`_joined`).
        self._byte_blob = np.frombuffer(b"".join(b or b"" for b in table), np.uint8)
        self._byte_starts = np.cumsum(self._byte_lengths) - self._byte_lengths
        self._known = np.array([b is not None for b in table], np.bool_)

    def check_ids(self, ids: npt.NDArray[np.int64], field: str) -> None:
        bad = ((ids < 0) | (ids >= self.vocab_size)).nonzero()[0]  # ids: 1-D
        if bad.size == 0 and self._known is not None:
            bad = (~self._known[ids]).nonzero()[0]
        if bad.size:
            k = int(bad[0])
            raise TokenIdError(
                f"token id {int(ids[k])} is not in the vocabulary of tokenizer {self.name!r} "
                f"(size {self.vocab_size}); {bad.size} bad id(s) in all",
                field=f"{field}[{k}]",
            )

    def decode(
        self, token_ids: Sequence[int] | npt.NDArray[np.int64], field: str = "response_token_ids"
    ) -> Trace:
        ids = as_ids(token_ids, field)
        self.check_ids(ids, field)
        if self._byte_table is not None:
            return self._decode_byte_level(ids)
        if self._pieces is not None:
            trace = self._pieces.decode(ids)
            if trace is not None:
                return trace
        return self._decode_incremental(ids)

    def _decode_byte_level(self, ids: npt.NDArray[np.int64]) -> Trace:
        table = self._byte_table
        assert table is not None and self._byte_lengths is not None
        if ids.shape[0] <= _GATHER_FROM:
            raw = b"".join([table[i] or b"" for i in ids.tolist()])
        elif _gather is not None:
            contiguous = np.ascontiguousarray(ids)  # a caller's strided view, copied
            raw = _gather(contiguous, self._byte_starts, self._byte_lengths, self._byte_blob)
        else:
            raw = self._joined(ids)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return self._decode_bytes_lossy(ids, table)
        offsets = np.zeros(ids.shape[0] + 1, np.int64)
        if raw:
            # A char is complete once its last byte has arrived; its last byte is just
            # before the next char's first byte, or the text's last. complete[b]: the
            # chars complete in the first b bytes, one running count over the bytes (a
            # binary search per id in the chars' last bytes took 4x as long: 32k prose,
            # 0.76 -> 0.19 ms).
            data = np.frombuffer(raw, dtype=np.uint8)
            complete = np.empty(len(raw) + 1, np.int64)
            complete[0] = 0
            ((data[1:] & 0xC0) != 0x80).cumsum(out=complete[1:-1])
            complete[-1] = complete[-2] + 1
            offsets[1:] = complete[self._byte_lengths[ids].cumsum()]
        return Trace(ids, text, offsets)

    def _joined(self, ids: npt.NDArray[np.int64]) -> bytes:
        """The definition of the compiled `_bytes.gather` (a copy per id: 32k prose ids
        0.67 -> 0.20 ms), used where it is not built.
        The bytes of `ids`, gathered from the table's one array: each output byte's
        index in it is its position plus how far its piece starts from where it lands
        (32k ids: 0.8 ms, where joining 32k Python bytes objects took 2.4 ms). By chunks of
        `_GATHER_CHUNK` ids: the index arrays take 8 bytes per output byte, and ids chosen
        for the longest pieces must not make a request's decode hold gigabytes of them."""
        assert self._byte_lengths is not None
        parts: list[bytes] = []
        for at in range(0, ids.shape[0], _GATHER_CHUNK):
            chunk = ids[at : at + _GATHER_CHUNK]
            lengths = self._byte_lengths[chunk]
            ends = np.cumsum(lengths)
            shift = np.repeat(self._byte_starts[chunk] - (ends - lengths), lengths)
            index = np.arange(int(ends[-1]), dtype=np.int64) + shift
            parts.append(self._byte_blob[index].tobytes())
        return b"".join(parts)

    def _decode_bytes_lossy(self, ids: npt.NDArray[np.int64], table: list[bytes | None]) -> Trace:
        # Invalid UTF-8 (a truncated character, stray continuation bytes): decode
        # token by token with the same replacement rule the tokenizer applies.
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pieces: list[str] = []
        for i in ids.tolist():
            chunk = table[i]
            assert chunk is not None
            pieces.append(decoder.decode(chunk))
        pieces[-1] += decoder.decode(b"", final=True)
        return _trace_from_pieces(ids, pieces)

    def _decode_incremental(self, ids: npt.NDArray[np.int64]) -> Trace:
        ids_list = ids.tolist()
        pieces = [""] * len(ids_list)
        prefix_offset = 0
        read_offset = 0
        for i in range(len(ids_list)):
            prefix_text = self._decode_ids(ids_list[prefix_offset:read_offset])
            new_text = self._decode_ids(ids_list[prefix_offset : i + 1])
            if len(new_text) > len(prefix_text) and not new_text.endswith(_REPLACEMENT):
                pieces[i] = new_text[len(prefix_text) :]
                prefix_offset, read_offset = read_offset, i + 1
        if read_offset < len(ids_list):
            prefix_text = self._decode_ids(ids_list[prefix_offset:read_offset])
            pieces[-1] = self._decode_ids(ids_list[prefix_offset:])[len(prefix_text) :]
        return _trace_from_pieces(ids, pieces)

    def _decode_ids(self, ids: list[int]) -> str:
        if not ids:
            return ""
        return str(
            self.hf.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        )


def as_ids(token_ids: Sequence[int] | npt.NDArray[np.int64], field: str) -> npt.NDArray[np.int64]:
    """The ids as int64, where they are first converted: JSON gives Python ints of any
    size, and one past int64 would be an OverflowError (a 500) here or in the cache key."""
    try:
        return np.asarray(token_ids, dtype=np.int64).reshape(-1)
    except OverflowError:
        pass
    for k, value in enumerate(token_ids):
        value = int(value)
        if not -(2**63) <= value < 2**63:
            # bit_length, never str(): a huge int's digits are quadratic to print.
            size = str(value) if value.bit_length() <= 64 else f"of {value.bit_length()} bits"
            raise TokenIdError(
                f"token id {size} is outside the range of token ids (64-bit integers)",
                field=f"{field}[{k}]",
            )
    raise AssertionError("unreachable: numpy refused ids that all fit in int64")


def _trace_from_pieces(ids: npt.NDArray[np.int64], pieces: list[str]) -> Trace:
    offsets = np.zeros(len(pieces) + 1, np.int64)
    if pieces:
        offsets[1:] = np.cumsum([len(p) for p in pieces])
    return Trace(ids, "".join(pieces), offsets)
