"""Tools users run (docs/auditing.md): ``python -m judge_service.devtools.arith_traces`` (arithmetic
traces with known flaws, for auditing a judge) and ``python -m
judge_service.devtools.credit_runs`` (CSCR / CoRT and gap-filled judges' credit as span
results, for ``audit --compare``).

What only tests and benchmarks use (the scripted provider servers, the attacks, the small
local tokenizers, the llama.cpp server) is in tests/harness/, outside the wheel; nothing
here imports it."""
