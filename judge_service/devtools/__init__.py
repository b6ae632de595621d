"""Tools users run (docs/auditing.md): ``python -m judge_service.devtools.arith_traces`` (arithmetic
traces with known flaws, for auditing a judge) and ``python -m
judge_service.devtools.credit_runs`` (CSCR / CoRT and gap-filled judges' credit as span
results, for ``audit --compare``).

For maintainers, in a checkout: ``python -m judge_service.devtools.layers`` (the
package's import cycles and the imports that run up its layers, ARCHITECTURE.md's
Layers section with ``--write`` / ``--check``), over the import graph that
``imports.py`` reads from the source.

What only tests and benchmarks use (the scripted provider servers, the attacks, the small
local tokenizers, the llama.cpp server) is in tests/harness/, outside the wheel; nothing
here imports it."""
