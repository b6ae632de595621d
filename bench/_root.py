"""The repository root on sys.path, for the benches that use tests.harness: after the
PYTHONPATH entries, so that a checkout named there (the "before" of a comparison:
``PYTHONPATH=/tmp/before .venv/bin/python bench/X.py``) is the judge_service the bench
imports, and before site-packages, where a dependency installs a top-level ``tests``
package of its own. (Benches run as scripts: sys.path[0] is bench/, then PYTHONPATH.)"""

import os
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])
_named = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
if ROOT not in sys.path[: 1 + len(_named) + 1]:
    sys.path.insert(1 + len(_named), ROOT)
