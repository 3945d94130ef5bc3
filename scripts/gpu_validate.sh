#!/usr/bin/env bash
# The GPU checks of docs/cuda-validation.md in one command, for a CUDA machine with PyTorch 2.x:
#   scripts/gpu_validate.sh OUT_DIR [STAGE...]      stages: env suite replay calibrated record corrupt fullcheck
# (default: all but fullcheck, in that order: what matters first comes first). The whole run fits one
# 10-minute device call: TOTAL_S (default 540) bounds it, and each stage gets the smaller of its own
# budget and what is left. COOPSIM (default build-cuda/src/coopsim) and TEST_GPU (default
# build-cuda/tests/test_gpu) name the binaries of a -Dcuda=enabled build; PYTHON (default python3) the
# interpreter with torch. Each stage has a wall-clock budget (STAGE_<NAME>_S) so that one slow stage
# cannot starve the next; what a stage did not reach is named in OUT_DIR/log.txt. Everything a later
# analysis needs lands in OUT_DIR: gpu/ (plans' simulations and replay-gpu reports, the link fit), rec/
# (recorded traces, memory snapshots, their imports and address checks).
#   Replays: every bundled trace under keep (110 %, 150 %), coop (60 %, 80 %) and autoswap (50 %, 80 %)
#   on the bestfit arena, REPLAY_WARMUP (1) + REPLAY_ITERATIONS (3) replays each, biggest traces last.
#   Recordings: RECORD_ITERATIONS (3) iterations each, so that an op's duration is a median of three.
set -u
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/gpu_validate.sh OUT_DIR [STAGE...]}"
shift
stages="${*:-env suite replay calibrated record corrupt}"
run_end=$(( $(date +%s) + ${TOTAL_S:-540} ))
B="${COOPSIM:-build-cuda/src/coopsim}"
T="${TEST_GPU:-build-cuda/tests/test_gpu}"
PY="${PYTHON:-python3}"
warmup="${REPLAY_WARMUP:-1}"
iterations="${REPLAY_ITERATIONS:-3}"
mkdir -p "$out/gpu" "$out/rec"
log() { echo "== $* ($(date -u +%H:%M:%S))"; }
has() { [[ " $stages " == *" $1 "* ]]; }
# A stage's end: its own budget from now, or the run's end if that comes first.
deadline() { local e=$(( $(date +%s) + $1 )); echo $(( e < run_end ? e : run_end )); }
left() { echo $(( $1 - $(date +%s) )); }

if has env; then
  log env
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,pcie.link.gen.max,pcie.link.width.max \
    --format=csv
  "$PY" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda",
    torch.version.cuda, torch.cuda.get_device_name(0))'
  uname -r; nproc; free -g | head -2
fi

if has suite; then
  log "suite: $T (Catch2)"
  timeout "$(left "$(deadline "${STAGE_SUITE_S:-30}")")" "$T" 2>&1 | tee "$out/gpu/suite.txt"
  echo "suite exit ${PIPESTATUS[0]}"
fi

if has replay; then
  end=$(deadline "${STAGE_REPLAY_S:-300}")
  log "replay: plans (CPU, parallel)"
  jobs=()
  # First one budget of keep and Coop and both of AutoSwap on every trace, then the other keep and
  # Coop budgets while the stage has time.
  for pbs in "keep:110 coop:80 autoswap:50 autoswap:80" "keep:150 coop:60"; do
    for m in default resnet50 unet swin_t inception_v3 densenet121 resnet152 bilstm bert_large gpt2 \
             llama_1b_bf16_ckpt llama_1b_bf16; do
      for pb in $pbs; do
        jobs+=("$m ${pb%%:*} ${pb#*:}")
      done
    done
  done
  printf '%s\n' "${jobs[@]}" | xargs -P "$(nproc)" -L 1 sh -c \
    "$B run traces/\$0.jsonl.gz -a bestfit -p \$1 -b \$2% -q -o $out/gpu/\$0.\$1.\$2.sim.json \
       --plan /tmp/\$0.\$1.\$2.plan.json 2>$out/gpu/\$0.\$1.\$2.sim.err || true"
  log "replay: replay-gpu, --warmup $warmup --iterations $iterations"
  link_done=0
  for j in "${jobs[@]}"; do
    set -- $j; n="$1.$2.$3"
    if [ ! -f "/tmp/$n.plan.json" ]; then echo "$n: no plan ($(head -c 200 "$out/gpu/$n.sim.err"))"; continue; fi
    [ "$(left "$end")" -gt 5 ] || { echo "$n: not reached (stage budget)"; continue; }
    cal=()
    [ $link_done -eq 0 ] && [ "$2" = autoswap ] && cal=(--calibrate-link "$out/gpu/link.json") && link_done=1
    timeout "$(left "$end")" "$B" replay-gpu "/tmp/$n.plan.json" --warmup "$warmup" --iterations "$iterations" \
      -o "$out/gpu/$n.gpu.json" "${cal[@]}" >"$out/gpu/$n.gpu.txt" 2>&1
    echo "$n: replay-gpu exit $? $(grep -m1 -i 'error\|measured' "$out/gpu/$n.gpu.txt" | head -c 160)"
  done
fi

if has calibrated; then
  # The autoswap simulations again with the measured link instead of the pcie4-x16 preset, replayed:
  # separates the link model's error from the compute timing's.
  end=$(deadline "${STAGE_CALIBRATED_S:-90}")
  if [ -f "$out/gpu/link.json" ]; then
    log "calibrated: link"; cat "$out/gpu/link.json"
    for m in resnet50 unet swin_t inception_v3 densenet121 bert_large resnet152 bilstm gpt2; do
      for b in 50 80; do
        n="$m.autoswap.$b.cal"
        [ "$(left "$end")" -gt 5 ] || { echo "$n: not reached (stage budget)"; continue; }
        "$B" run "traces/$m.jsonl.gz" -c "$out/gpu/link.json" -a bestfit -p autoswap -b "$b%" -q \
          -o "$out/gpu/$n.sim.json" --plan "/tmp/$n.plan.json" 2>"$out/gpu/$n.sim.err" || { echo "$n: no plan"; continue; }
        timeout "$(left "$end")" "$B" replay-gpu "/tmp/$n.plan.json" --warmup "$warmup" --iterations "$iterations" \
          -o "$out/gpu/$n.gpu.json" >"$out/gpu/$n.gpu.txt" 2>&1
        echo "$n: replay-gpu exit $?"
      done
    done
  else
    log "calibrated: no link.json (no autoswap replay ran)"
  fi
fi

if has record; then
  # The recorder with CUDA-event durations and, in the same run, the caching allocator's history:
  # each snapshot imported and simulated with --check-addresses; then the same step timed without the
  # recorder (scripts/time_pytorch_step.py) for the recorded durations' overhead.
  # GPT-2 and Llama first: their traces in traces/h200 were timed with bare event pairs (issue 33);
  # ResNet-50's already has the shielded timer. RECORD_MODELS picks (default: gpt2 llama_1b).
  end=$(deadline "${STAGE_RECORD_S:-120}")
  for spec in "gpt2|gpt2_b8|--batch 8" "llama_1b|llama_1b_bf16_b4|--batch 4 --amp bf16" \
              "resnet50|resnet50_b115|--batch 115"; do
    [[ " ${RECORD_MODELS:-gpt2 llama_1b} " == *" ${spec%%|*} "* ]] || continue
    IFS='|' read -r m name opts <<<"$spec"
    [ "$(left "$end")" -gt 20 ] || { log "record $m: not reached (stage budget)"; continue; }
    log "record $m $opts"
    COOPSIM_RECORD_TRACEBACK=1 timeout "$(left "$end")" "$PY" scripts/record_pytorch.py --model "$m" $opts \
      --iterations "${RECORD_ITERATIONS:-3}" \
      --memory-snapshot "$out/rec/$name.snapshot.pickle.gz" -o "$out/rec/$name.jsonl.gz"
    echo "record exit $?"
    timeout "$(left "$end")" "$PY" scripts/time_pytorch_step.py --model "$m" $opts | tee "$out/rec/$name.step.json"
    [ -f "$out/rec/$name.jsonl.gz" ] || continue
    "$B" validate "$out/rec/$name.jsonl.gz" 2>&1 | tail -n 3
    if [ -f "$out/rec/$name.snapshot.pickle.gz" ]; then
      "$B" import torch-snapshot "$out/rec/$name.snapshot.pickle.gz" -o "$out/rec/$name.snapshot.jsonl.gz" 2>&1 |
        tee "$out/rec/$name.import.txt"
      "$B" run "$out/rec/$name.snapshot.jsonl.gz" -a pytorch -p keep --check-addresses \
        -o "$out/rec/$name.snapshot.run.json" 2>&1 | tail -n 12
      echo "check-addresses exit ${PIPESTATUS[0]}"
    fi
  done
fi

if has corrupt; then
  # The integrity check on a real plan: the first swap-in removed (its block poisoned) must fail at the
  # step that reads the tensor.
  log corrupt
  src=$(for f in /tmp/resnet50.autoswap.50.plan.json /tmp/*.autoswap.50.plan.json; do [ -f "$f" ] && echo "$f"; done | head -n 1)
  if [ -n "$src" ]; then
    "$PY" scripts/corrupt_plan.py "$src" /tmp/corrupt.plan.json | tee "$out/gpu/corrupt.txt"
    "$B" replay-gpu /tmp/corrupt.plan.json >>"$out/gpu/corrupt.txt" 2>&1
    echo "plan checker exit $? (1 = rejected)" | tee -a "$out/gpu/corrupt.txt"
    timeout 60 "$B" replay-gpu /tmp/corrupt.plan.json --skip-check --poison --iterations 1 --warmup 0 \
      -o "$out/gpu/corrupt.gpu.json" >>"$out/gpu/corrupt.txt" 2>&1
    echo "replay-gpu --skip-check exit $? (6 = integrity failure)" | tee -a "$out/gpu/corrupt.txt"
  else
    echo "no autoswap plan to corrupt"
  fi
fi
if has fullcheck; then
  # The same replays with every input word checked (--full-check): what the check costs when it is
  # not fitted into the ops' durations.
  log fullcheck
  for n in resnet50.keep.110 resnet50.autoswap.80; do
    [ -f "/tmp/$n.plan.json" ] || continue
    timeout 60 "$B" replay-gpu "/tmp/$n.plan.json" --full-check --warmup "$warmup" --iterations "$iterations" \
      -o "$out/gpu/$n.full.gpu.json" 2>&1 | tee "$out/gpu/$n.full.gpu.txt"
  done
fi
log done
