"""The progress probe: audit a judge without trusting it, and measure where traces lock in.

A frozen causal LM is made to commit to an answer at a cut point of a trace
(a forced ending such as ``\\n</think>\\n\\nThe final answer is $\\boxed{``), and
the mean log-probability of the reference answer's tokens is the probe value.
Read at each judged span's start and end it gives the span a progress score
that never saw the judge's labels (`progress`), which the audit compares with
the judge's scores (`audit`, `stats`, `report`). Read every N tokens it shows
where a trace locks in its answer (`lockin`).

Modules that need torch (`scorer`, `loading`) are imported only where used, so
the audit and the CLI run without the ``probe`` extra.
"""
