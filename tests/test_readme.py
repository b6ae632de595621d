"""The short README: its two commands stay first, it stays short, and its trainer example runs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from judge_service.api.app import create_app
from judge_service.config import Settings
from tests.conftest import EXAMPLES, LiveServer

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_is_short_and_opens_with_the_two_commands() -> None:
    assert len(README.splitlines()) <= 250
    first = re.search(r"```bash\n(.*?)```", README, re.DOTALL)
    assert first is not None
    lines = [line for line in first.group(1).splitlines() if line and not line.startswith("#")]
    assert lines[0].startswith("python3 -m venv .venv") and "pip install -e ./client" in lines[0]
    assert lines[0].endswith("judge-service judge examples/rollouts.jsonl -o results.jsonl")
    assert lines[1] == ".venv/bin/python -m pytest -q"
    # Every page it links to is there.
    for link in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (ROOT / link).is_file(), link


def test_the_readme_trainer_example_runs_against_a_live_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    block = re.search(r"```python\n(.*?)```", README, re.DOTALL)
    assert block is not None
    settings = Settings(
        default_tokenizer=str(EXAMPLES / "tokenizer"), tokenizer_roots=[str(EXAMPLES)]
    )
    monkeypatch.chdir(ROOT)
    with LiveServer(create_app(settings)) as live:
        code = block.group(1).replace("http://127.0.0.1:8000", live.url)
        namespace: dict[str, Any] = {"__name__": "readme_example"}
        exec(compile(code, "README.md", "exec"), namespace)
    batch, credit, advantage = namespace["batch"], namespace["credit"], namespace["advantage"]
    assert [r.status for r in batch.results] == ["ok"] * 3
    assert credit.dtype == np.float32 and credit.shape == advantage.shape
    assert credit.shape[0] == 3 and np.any(credit != 0)
