#!/usr/bin/env bash
# The "On the H200 recordings" outputs of docs/snapshot-diff.md: fake recordings of the three models of
# traces/h200 (same batch, iterations and precision, --device-profile h200, on the CPU with torch 2.x),
# then `coopsim snapshot diff` of each H200 snapshot and each H200 trace against them, and the timeline
# figures of the Llama snapshot.
#   scripts/h200_diffs.sh [OUT_DIR]     COOPSIM (default build/src/coopsim), PYTHON (torch 2.x; default
#                                       $COOPSIM_TORCH2_PYTHON, else python3)
set -eu
cd "$(dirname "$0")/.."
out="${1:-out/h200-diffs}"
B="${COOPSIM:-build/src/coopsim}"
PY="${PYTHON:-${COOPSIM_TORCH2_PYTHON:-python3}}"
mkdir -p "$out"
for spec in "resnet50_b115|resnet50|115|" "gpt2_b8|gpt2|8|" "llama_1b_bf16_b4|llama_1b|4|--amp bf16"; do
  IFS='|' read -r name model batch amp <<<"$spec"
  [ -f "$out/$name.jsonl.gz" ] || "$PY" scripts/record_pytorch.py --quiet --fake --device-profile h200 --model "$model" \
    --batch "$batch" --iterations 3 $amp -o "$out/$name.jsonl.gz"
done
for name in resnet50_b115 gpt2_b8 llama_1b_bf16_b4; do
  echo "\$ coopsim snapshot diff traces/h200/$name.snapshot.pickle.gz fake/$name.jsonl.gz --rows 4"
  "$B" snapshot diff "traces/h200/$name.snapshot.pickle.gz" "$out/$name.jsonl.gz" --rows 4 | sed "s|$out/|fake/|g"
  echo "\$ coopsim snapshot diff traces/h200/$name.jsonl.gz fake/$name.jsonl.gz --rows 4"
  "$B" snapshot diff "traces/h200/$name.jsonl.gz" "$out/$name.jsonl.gz" --rows 4 | sed "s|$out/|fake/|g"
done
/usr/bin/time -f "timeline: %e s, %M KB" "$B" snapshot timeline traces/h200/llama_1b_bf16_b4.snapshot.pickle.gz \
  -o "$out/llama.timeline.json"
"$B" snapshot timeline traces/h200/llama_1b_bf16_b4.snapshot.pickle.gz --from 11.4s --to 11.6s -o "$out/llama.window.json"
