#!/usr/bin/env bash
# The GPU checks of docs/cuda-validation.md in one command, for a CUDA machine with PyTorch 2.x:
#   scripts/gpu_validate.sh OUT_DIR [STAGE...]   stages: env suite replay link calibrated corrupt record fullcheck
# (default: all but fullcheck, in that order: what matters first comes first; corrupt, a check of
# the integrity check, before the slow recordings). The whole run fits one
# 10-minute device call: TOTAL_S (default 540) bounds it, and each stage gets the smaller of its own
# budget (STAGE_<NAME>_S) and what is left, so that one slow stage cannot starve the next; what a stage
# did not reach is named in the log. COOPSIM (default build-cuda/src/coopsim) and TEST_GPU (default
# build-cuda/tests/test_gpu) name the binaries of a -Dcuda=enabled build; PYTHON (default python3) the
# interpreter with torch; TRACES (default traces) the folder of the traces replayed. Everything a later
# analysis needs lands in OUT_DIR as it goes: gpu/ (plans' simulations and replay-gpu reports, the link
# fit), rec/ (recorded traces, memory snapshots, their imports and address checks).
#   replay: every trace under keep (110 %) and coop (80 %) on the bestfit arena, then keep 150 % and
#     coop 60 % while the stage has time (REPLAY_JOBS="TRACE:POLICY:BUDGET ..." replaces that list);
#     REPLAY_WARMUP (1) + REPLAY_ITERATIONS (3) replays each.
#   link: ResNet-50 under autoswap at 50 % with the h200 link preset, replayed with --calibrate-link:
#     gpu/link.json is the fit of that replay's own copies (link_in_replay).
#   calibrated: autoswap at 50 % and 80 % simulated with gpu/link.json and replayed.
#   record: the recorder with CUDA-event durations (RECORD_ITERATIONS (3) iterations, so that an op's
#     duration is a median of three) and the allocator's history, then the same step timed bare.
set -u
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/gpu_validate.sh OUT_DIR [STAGE...]}"
shift
stages="${*:-env suite replay link calibrated corrupt record}"
run_end=$(( $(date +%s) + ${TOTAL_S:-540} ))
B="${COOPSIM:-build-cuda/src/coopsim}"
T="${TEST_GPU:-build-cuda/tests/test_gpu}"
PY="${PYTHON:-python3}"
TR="${TRACES:-traces}"
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

models="default resnet50 unet swin_t inception_v3 densenet121 resnet152 bilstm bert_large gpt2 llama_1b_bf16_ckpt llama_1b_bf16"
# plan NAME TRACE POLICY BUDGET [RUN ARGS...]: the simulation report and the plan /tmp/NAME.plan.json.
plan() {
  local n="$1" m="$2" p="$3" b="$4"; shift 4
  "$B" run "$TR/$m.jsonl.gz" -a bestfit -p "$p" -b "$b%" -q "$@" -o "$out/gpu/$n.sim.json" --plan "/tmp/$n.plan.json" \
    2>"$out/gpu/$n.sim.err"
}
# replay NAME END [REPLAY ARGS...]: replay-gpu of /tmp/NAME.plan.json until END at the latest.
replay() {
  local n="$1" end="$2"; shift 2
  if [ ! -f "/tmp/$n.plan.json" ]; then echo "$n: no plan ($(head -c 200 "$out/gpu/$n.sim.err" 2>/dev/null))"; return; fi
  [ "$(left "$end")" -gt 5 ] || { echo "$n: not reached (stage budget)"; return; }
  timeout "$(left "$end")" "$B" replay-gpu "/tmp/$n.plan.json" --warmup "$warmup" --iterations "$iterations" \
    -o "$out/gpu/$n.gpu.json" "$@" >"$out/gpu/$n.gpu.txt" 2>&1
  echo "$n: replay-gpu exit $? $(grep -m1 -i 'error\|measured' "$out/gpu/$n.gpu.txt" | head -c 160)"
}
export -f plan; export B TR out

if has replay; then
  end=$(deadline "${STAGE_REPLAY_S:-170}")
  log "replay: plans (CPU, parallel)"
  jobs=()
  if [ -n "${REPLAY_JOBS:-}" ]; then  # TRACE:POLICY:BUDGET ..., in that order
    for j in $REPLAY_JOBS; do IFS=: read -r m p b <<<"$j"; jobs+=("$m.$p.$b $m $p $b"); done
  else
    for pbs in "keep:110 coop:80" "keep:150 coop:60"; do
      for m in $models; do
        for pb in $pbs; do jobs+=("$m.${pb%%:*}.${pb#*:} $m ${pb%%:*} ${pb#*:}"); done
      done
    done
  fi
  printf '%s\n' "${jobs[@]}" | xargs -P "$(nproc)" -L 1 bash -c 'plan "$@" || true' _
  log "replay: replay-gpu, --warmup $warmup --iterations $iterations"
  for j in "${jobs[@]}"; do replay "${j%% *}" "$end"; done
fi

if has link; then
  # The link as copies run during training: the fit of one autoswap replay's own copies.
  end=$(deadline "${STAGE_LINK_S:-30}")
  log "link: resnet50 autoswap 50 % (h200 preset), --calibrate-link"
  plan resnet50.autoswap.50.h200 resnet50 autoswap 50 --set link.preset=h200 || echo "no plan"
  replay resnet50.autoswap.50.h200 "$end" --calibrate-link "$out/gpu/link.json"
fi

if has calibrated; then
  # autoswap simulated with the link measured in this run, replayed (without a measured link: the h200
  # preset, the fit of the 2026-11-27 replays' copies).
  end=$(deadline "${STAGE_CALIBRATED_S:-120}")
  link=(--set link.preset=h200)
  if [ -f "$out/gpu/link.json" ]; then
    log "calibrated: link"; cat "$out/gpu/link.json"; link=(-c "$out/gpu/link.json")
  else
    log "calibrated: no link.json (the link stage did not run or fit): the h200 preset"
  fi
  for m in resnet50 unet swin_t inception_v3 densenet121 bert_large resnet152 bilstm gpt2; do
    for b in 50 80; do
      plan "$m.autoswap.$b.cal" "$m" autoswap "$b" "${link[@]}" || { echo "$m.autoswap.$b.cal: no plan"; continue; }
      replay "$m.autoswap.$b.cal" "$end"
    done
  done
fi

if has corrupt; then
  # The integrity check on a real plan: the first swap-in removed (its block poisoned) must fail at the
  # step that reads the tensor.
  end=$(deadline "${STAGE_CORRUPT_S:-20}")
  log corrupt
  src=$(for f in /tmp/resnet50.autoswap.50.cal.plan.json /tmp/*.autoswap.*.plan.json; do [ -f "$f" ] && echo "$f"; done | head -n 1)
  if [ -n "$src" ]; then
    "$PY" scripts/corrupt_plan.py "$src" /tmp/corrupt.plan.json | tee "$out/gpu/corrupt.txt"
    "$B" replay-gpu /tmp/corrupt.plan.json >>"$out/gpu/corrupt.txt" 2>&1
    echo "plan checker exit $? (1 = rejected)" | tee -a "$out/gpu/corrupt.txt"
    timeout "$(left "$end")" "$B" replay-gpu /tmp/corrupt.plan.json --skip-check --poison --iterations 1 --warmup 0 \
      -o "$out/gpu/corrupt.gpu.json" >>"$out/gpu/corrupt.txt" 2>&1
    echo "replay-gpu --skip-check exit $? (6 = integrity failure)" | tee -a "$out/gpu/corrupt.txt"
  else
    echo "no autoswap plan to corrupt"
  fi
fi
if has record; then
  # The recorder with CUDA-event durations and, in the same run, the caching allocator's history:
  # each snapshot imported and simulated with --check-addresses; then the same step timed without the
  # recorder (scripts/time_pytorch_step.py) for the recorded durations' overhead.
  # GPT-2 and Llama first: their traces in traces/h200 were timed with bare event pairs (issue 33);
  # ResNet-50's already has the shielded timer. RECORD_MODELS picks (default: gpt2 llama_1b).
  end=$(deadline "${STAGE_RECORD_S:-170}")
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

if has fullcheck; then
  # The same replays with every input word checked (--full-check): what the check costs when it is
  # not fitted into the ops' durations.
  log fullcheck
  for n in resnet50.keep.110 resnet50.autoswap.80.cal; do
    [ -f "/tmp/$n.plan.json" ] || continue
    timeout 60 "$B" replay-gpu "/tmp/$n.plan.json" --full-check --warmup "$warmup" --iterations "$iterations" \
      -o "$out/gpu/$n.full.gpu.json" 2>&1 | tee "$out/gpu/$n.full.gpu.txt"
  done
fi
log done
