"""Forced endings and the seam rule: how an answer is appended at a cut and which tokens score it.

The probe cuts a trace at a token boundary, appends a fixed ending that forces
the model to commit (``\\n</think>\\n\\nThe final answer is $\\boxed{``), then the
answer and a closer (``}$``), and reads the log-probability of the answer's
tokens.

Seam rule: ending, answer and closer are tokenized together as one string, as
the model would meet them in real text, and the answer's tokens are the ones
whose characters overlap the answer. Tokenizing them apart scores a sequence
the model never writes: ``\\boxed{-5}`` is ``{-`` + ``5`` in many BPEs, and
scoring ``{`` + ``-`` + ``5`` makes correct traces look lost. A token that
straddles the seam (``{-``, ``8}``) therefore counts as an answer token.

Endings come per model family, each with a default and a second wording used
as a robustness check. The family is read from the tokenizer: a model whose
vocabulary has ``</think>`` as one token (Qwen3, QwQ, DeepSeek-R1 and their
distills) closes its thinking block; any other model is given the same words
without the tag, which for it would only be noise characters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from judge_service.trace.tokenizer import LoadedTokenizer


@dataclass(frozen=True)
class Ending:
    prefix: str  # forced text between the cut and the answer
    closer: str  # text after the answer; tokenized with it so the last seam is natural too


@dataclass(frozen=True)
class EndingPair:
    family: str
    default: Ending
    alternative: Ending  # second wording, for the robustness check


ENDING_FAMILIES: dict[str, EndingPair] = {
    "think": EndingPair(
        "think",
        Ending("\n</think>\n\nThe final answer is $\\boxed{", "}$"),
        Ending("\n</think>\n\n**Final Answer**\n$\\boxed{", "}$"),
    ),
    "plain": EndingPair(
        "plain",
        Ending("\n\nThe final answer is $\\boxed{", "}$"),
        Ending("\n\n**Final Answer**\n$\\boxed{", "}$"),
    ),
}

# model_type values whose released chat models always think, whatever the tokenizer says.
_THINKING_MODEL_TYPES = frozenset({"qwen3", "qwen3_moe", "deepseek_v3"})


def resolve_family(hf_tokenizer: Any, model_type: str | None = None) -> EndingPair:
    """The ending family of a model: ``think`` when ``</think>`` is one token, else ``plain``."""
    if model_type in _THINKING_MODEL_TYPES:
        return ENDING_FAMILIES["think"]
    ids = hf_tokenizer.encode("</think>", add_special_tokens=False)
    return ENDING_FAMILIES["think" if len(ids) == 1 else "plain"]


@dataclass(frozen=True)
class EncodedSuffix:
    """Ending + answer + closer as token ids, and which of them are the answer's."""

    ids: tuple[int, ...]
    answer_start: int  # answer tokens are ids[answer_start:answer_end]
    answer_end: int
    answer: str
    text: str
    ending: str = ""  # the forced ending's text; suffixes that share it share their first tokens

    @property
    def num_answer_tokens(self) -> int:
        return self.answer_end - self.answer_start


def encode_suffix(tokenizer: LoadedTokenizer, ending: Ending, answer: str) -> EncodedSuffix:
    """Tokenize ending, answer and closer together and find the answer's tokens (the seam rule)."""
    if not answer:
        raise ValueError("cannot score an empty answer")
    text = ending.prefix + answer + ending.closer
    char_start = len(ending.prefix)
    char_end = char_start + len(answer)
    encoded = tokenizer.hf(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = [int(i) for i in encoded["input_ids"]]
    first, last = _answer_tokens(tokenizer, ids, text, char_start, char_end, encoded)
    return EncodedSuffix(tuple(ids), first, last, answer, text, ending.prefix)


def _answer_tokens(
    tokenizer: LoadedTokenizer,
    ids: list[int],
    text: str,
    char_start: int,
    char_end: int,
    encoded: Any,
) -> tuple[int, int]:
    # Exact char ranges come from our own decoder when it reproduces the text: it
    # gives a character split across byte tokens to the token that completes it,
    # and `tokens_for_chars` pulls in the leading byte tokens of the first char.
    decoded = tokenizer.decode(ids, field="suffix")
    if decoded.text == text:
        return decoded.tokens_for_chars(char_start, char_end)
    # Otherwise (normalizers, a prepended Metaspace space): the tokenizer's offsets.
    overlapping = [
        k for k, (a, b) in enumerate(encoded["offset_mapping"]) if a < char_end and b > char_start
    ]
    if not overlapping:
        raise ValueError(f"no token of {text!r} overlaps the answer")
    return overlapping[0], overlapping[-1] + 1
