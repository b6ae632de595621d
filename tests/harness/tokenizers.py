"""Build small tokenizers locally with the `tokenizers` library, saved as users' are.

No model hub is reachable in tests, so tests, benchmarks and the bundled
examples train their tokenizers here and load them through `transformers`
from a directory, exactly as a policy's tokenizer is loaded in production.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]

MATH_CORPUS = [
    "Let me compute 17 × 24 step by step.",
    "17 × 24 = 17 × 20 + 17 × 4 = 340 + 68 = 408.",
    "So the answer is \\boxed{408}.",
    "The answer is \\boxed{-5}. Therefore x = -5 and \\boxed{-5} is final.",
    "\\boxed{-3} \\boxed{-12} \\boxed{-7} \\boxed{-1} {-",
    "Wait, that's wrong. Actually 3 + 4 = 7, not 8.",
    "We have \\frac{1}{2} + \\frac{1}{3} = \\frac{5}{6}.",
    "Check: 2^{10} = 1024 and \\sqrt{144} = 12.",
    "Hmm, let me re-check the computation. 12 * 12 = 144.",
    "The area is 3.5 \\cdot 2 = 7 square units.",
    "Thus 100 - 37 = 63, and 63 / 9 = 7.",
    "Therefore, the final answer is 42.",
    "Let's verify: 6 · 7 = 42. Yes.",
    "Première étape : calculons 5 × 5 = 25 — très simple.",
    "数学题：3 + 5 = 8。",
    "<think>\nOkay, so I need to find the value.\n</think>\n",
]


def math_corpus(repeat: int = 20) -> list[str]:
    return MATH_CORPUS * repeat


def build_byte_level_bpe(
    directory: Path | str,
    *,
    vocab_size: int = 600,
    corpus: Iterable[str] | None = None,
    special_tokens: list[str] | None = None,
) -> Path:
    """Train a GPT-2 style byte-level BPE (as Qwen and Llama 3 use) and save it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = SPECIAL_TOKENS if special_tokens is None else special_tokens
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,
    )
    tokenizer.train_from_iterator(list(corpus or math_corpus()), trainer=trainer)
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tokenizer,
        eos_token=specials[0] if specials else None,
        additional_special_tokens=specials[1:],
    )
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(path))
    return path


def build_metaspace_bpe(directory: Path | str, *, vocab_size: int = 400) -> Path:
    """A SentencePiece-style tokenizer (Metaspace, byte fallback), as Llama 2 and Mistral use."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>"))
    tokenizer.normalizer = normalizers.Sequence([])
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tokenizer.decoder = decoders.Sequence(
        [
            decoders.Replace("▁", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(content=" ", left=1, right=0),
        ]
    )
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size + 256,
        special_tokens=["<unk>", "<s>", "</s>", *byte_tokens],
        min_frequency=2,
    )
    tokenizer.train_from_iterator(math_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(path))
    return path


def build_wordpiece(directory: Path | str, *, vocab_size: int = 500) -> Path:
    """A BERT-style WordPiece tokenizer (``##`` continuations, decoder cleanup)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=False)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials)
    tokenizer.train_from_iterator(
        [*math_corpus(), "I don't think it's done, we've seen they're right. Isn't it?"],
        trainer=trainer,
    )
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        mask_token="[MASK]",
    )
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(path))
    return path


def synthetic_trace(num_tokens: int, *, seed: int = 0) -> tuple[Path, list[int]]:
    """A local byte-level tokenizer (in a temporary directory) and `num_tokens` ids of
    math-like lines sampled from the corpus: the benchmarks' long trace."""
    import random
    import tempfile

    from transformers import AutoTokenizer

    corpus = math_corpus(40)
    directory = build_byte_level_bpe(
        Path(tempfile.mkdtemp()) / "tok", vocab_size=2000, corpus=corpus
    )
    tokenizer = AutoTokenizer.from_pretrained(str(directory))
    rng = random.Random(seed)
    ids: list[int] = []
    while len(ids) < num_tokens:
        ids.extend(tokenizer.encode(rng.choice(corpus) + "\n", add_special_tokens=False))
    return directory, ids[:num_tokens]
