#!/usr/bin/env bash
# Benchmark (method and figures: docs/performance.md): generates a large synthetic trace
# (>= 1M events), then measures
#  - parse rate of trace v1 (lines/s), plain and gzip, one core;
#  - simulation rate under keep for every allocator (events/s, rows `replay`), one core;
#  - simulation rate per allocator x policy at 60 % of the peak (recompute, swap, hybrid; rows
#    `replay-policy`), one core;
#  - sweep throughput (runs/s, two threads): 100 budgets x coop/dte/dtr on the largest bundled
#    traces;
#  - `coopsim plan` on 30 000 and 62 000 random buffers (wall time under --time-limit 5 / 10);
#  - wide traces (200 / 2,000 / 6,000 layers, 3 iterations; 20,000 with BENCH_WIDE_20000=1):
#    smartpool keep, dtr on fungible, coop on bestfit and pytorch, and autoswap, vdnn, capuchin and
#    pooch on pytorch, at 60 %, wall time under a timeout; events/s of dtr and coop (`wide-rate`);
#  - bounded work: a 50,000-layer chain of evictable layers under coop, dtr and dte at 50 %
#    (limits.max_search_steps ends runs whose searches would run for minutes: status limit);
#  - scaling: smartpool keep on 100k-800k tiny tensors all alive together (its offline planning);
#  - merge: `coopsim merge` of a 100,000-run sweep in 4 shards, wall time and peak RSS against the
#    target of issue 32 (under 300 MB), printed as pass / FAIL;
#  - peak resident memory of each measurement.
# Results: bench/results.csv and a printed summary. Targets: >= 1M lines/s, >= 10M events/s
# under keep, a 100-budget x 3-policy sweep of the largest bundled trace in < 10 s on 2 cores.
#   scripts/bench.sh [LAYERS] [ITERATIONS]
#   scripts/bench.sh predict   # before-launch prediction vs the H200 (scripts/predict.py): fake
#                              # recordings on PyPI's torch 2.x against traces/h200/measured.json
#   scripts/bench.sh merge     # the merge measurement alone (bench/merge.csv)
#   scripts/bench.sh simrd     # the simrd profile against simrd itself, per point (bench/simrd.md;
#                              # DTR_PROTOTYPE=<checkout of uwsampl/dtr-prototype>, see below)
#   scripts/bench.sh snapshots # snapshot import vs Python's pickle.load (bench/snapshots.csv)
set -eu
cd "$(dirname "$0")/.."
. scripts/deps.sh
coopsim_install_deps time
build="${BENCH_BUILD_DIR:-build-release}"
# CPU benchmarks: no CUDA backend, so that the executable links statically (-Dstatic_cli, meson.build).
[ -f "$build/build.ninja" ] || meson setup "$build" --buildtype=release -Dtests=disabled -Dcuda=disabled >/dev/null
ninja -C "$build" src/coopsim >/dev/null
coopsim="$build/src/coopsim"
if [ "${1:-}" = predict ]; then
  coopsim_torch2_venv
  exec python3 scripts/predict.py "$coopsim" "$COOPSIM_TORCH2_PYTHON" --out bench/predict
fi
# Merge (issue 32; docs/cluster.md): a sweep of 100,000 runs in 4 shards, merged. The runs: a tiny
# generated trace (2 layers, batch 2) under bestfit and pytorch at 50,000 budget ratios in (0, 1],
# nearly all out of memory, whose reports are the largest (about 5.5 KB of results.json each,
# 550 MB in all). The shards are swept on every core first; then the merge alone is measured:
# wall seconds and peak RSS (rows `merge` and `rss`). Target: under 300 MB whatever the sweep's
# size (merge streams; the code that read every shard whole took about 36 KB per run, 3.6 GB).
bench_merge() {
  local d=bench/merge-100k k
  rm -rf "$d"
  mkdir -p "$d"
  "$coopsim" generate -o "$d/t.jsonl" --set layers=2 --set batch=2 >/dev/null
  printf '{"traces": ["t.jsonl"], "allocators": ["bestfit", "pytorch"], "policies": ["keep"],\n "budgets": {"ratios": {"from": 0.00002, "to": 1.0, "step": 0.00002}}}\n' >"$d/sweep.json"
  for k in 1 2 3 4; do
    "$coopsim" sweep "$d/sweep.json" -j "$(nproc)" --shard "$k/4" -o "$d/shard-$k" >/dev/null 2>&1
  done
  /usr/bin/time -f "%e %M" -o bench/time.txt "$coopsim" merge "$d/shard-1" "$d/shard-2" "$d/shard-3" "$d/shard-4" \
    -o "$d/merged" >bench/merge-out.txt
  read -r secs rss <bench/time.txt
  local runs
  runs=$(awk '{ print $4 }' bench/merge-out.txt)
  echo "merge,$runs-runs-4-shards,seconds,$secs,$secs"
  echo "rss,merge-$runs-runs-4-shards,peak_kib,$rss,$secs"
  rm -rf "$d"  # some 1.1 GB
}
# The merge's peak RSS of a results CSV against the 300 MB target, one line.
merge_verdict() {
  awk -F, '$1 == "rss" && $2 ~ /^merge-/ {
    printf "merge (%s): %.1f s, peak RSS %.1f MB (target < 300 MB): %s\n", $2, $5, $4 * 1024 / 1e6,
      ($4 * 1024 < 300e6) ? "pass" : "FAIL" }' "$1"
}
# Snapshots (issue 35; docs/import-torch-snapshot.md): `coopsim import torch-snapshot` of PyTorch
# memory snapshots of about 14.5 MB, 290 MB and 1 GB (BENCH_SNAPSHOT_SIZES, in MB), written by
# scripts/make_snapshot.sh into bench/snapshots (kept between runs: the 1 GB one takes minutes to
# make), against Python's pickle.load of the same file (/usr/bin/python3; only the unpickling is
# timed, RSS is the process's peak). Rows: snapshot,<MB>-<entries>-entries,<tool>_seconds|
# <tool>_peak_kib. Targets: 290 MB in under 5 s and 1 GB, 1 GB in under 20 s and 2 GB.
bench_snapshots() {
  local d=bench/snapshots mb f secs rss entries py_secs
  mkdir -p "$d"
  for mb in ${BENCH_SNAPSHOT_SIZES:-14.5 290 1000}; do
    f="$d/snapshot-${mb}MB.pickle"
    [ -f "$f" ] || scripts/make_snapshot.sh "$coopsim" "$mb" "$f" >&2
    /usr/bin/time -f "%e %M" -o bench/time.txt /usr/bin/python3 -c 'import pickle, sys, time
with open(sys.argv[1], "rb") as f:
    t = time.perf_counter(); d = pickle.load(f); t = time.perf_counter() - t
print(sum(len(x) for x in d["device_traces"]), f"{t:.2f}")' "$f" >bench/snapshot-py.txt
    read -r entries py_secs <bench/snapshot-py.txt
    read -r secs rss <bench/time.txt
    local subject
    subject="$(awk -v b="$(stat -L -c %s "$f")" 'BEGIN { printf "%.1fMB", b / 1e6 }')-$entries-entries"
    echo "snapshot,$subject,python_pickle_load_seconds,$py_secs,$secs"
    echo "snapshot,$subject,python_peak_kib,$rss,$secs"
    /usr/bin/time -f "%e %M" -o bench/time.txt "$coopsim" import torch-snapshot "$f" -o "$d/imported.jsonl" \
      >/dev/null
    read -r secs rss <bench/time.txt
    echo "snapshot,$subject,coopsim_import_seconds,$secs,$secs"
    echo "snapshot,$subject,coopsim_import_peak_kib,$rss,$secs"
    rm -f "$d/imported.jsonl"
  done
}
# The snapshot rows as the table of issue 35, with the targets' verdicts.
snapshot_table() {
  awk -F, '$1 == "snapshot" { split($2, p, "-"); key = p[1] " | " p[2]; keys[key] = 1; order[++n] = key; v[key, $3] = $4 }
    END {
      print "| snapshot | entries | coopsim import | Python pickle.load |"
      for (i = 1; i <= n; i++) {
        k = order[i]; if (done[k]++) continue
        printf "| %s | %.2f s, %.0f MB RSS | %.2f s, %.0f MB |\n", k, v[k, "coopsim_import_seconds"],
          v[k, "coopsim_import_peak_kib"] * 1024 / 1e6, v[k, "python_pickle_load_seconds"], v[k, "python_peak_kib"] * 1024 / 1e6
      }
      for (i = 1; i <= n; i++) {
        k = order[i]; mb = k + 0; if (verdict[k]++) continue
        s = v[k, "coopsim_import_seconds"]; m = v[k, "coopsim_import_peak_kib"] * 1024 / 1e6
        if (mb >= 250 && mb < 900) printf "target 290 MB (< 5 s, < 1 GB): %s\n", (s < 5 && m < 1000) ? "pass" : "FAIL"
        if (mb >= 900) printf "target 1 GB (< 20 s, < 2 GB): %s\n", (s < 20 && m < 2000) ? "pass" : "FAIL"
      }
    }' "$1"
}
if [ "${1:-}" = snapshots ]; then
  mkdir -p bench
  { echo "kind,subject,metric,value,seconds"; bench_snapshots; } >bench/snapshots.csv
  snapshot_table bench/snapshots.csv
  exit 0
fi
# simrd (issue 34; docs/performance.md "The simrd profile"): coopsim's simrd profile against DTR's
# reference simulator on the public DTR logs, point by point: 8 logs x dtr, msps, dtr-eq x ratios
# 0.3, 0.5, 0.8, whole-process CPU seconds, median of BENCH_SIMRD_REPEAT runs (3), same verdict and
# clock checked (scripts/bench_simrd.py). simrd is never part of coopsim: pass a checkout of
# uwsampl/dtr-prototype (its simrd/ and the logs unzipped from simrd/logs.zip into simrd/logs) as
# DTR_PROTOTYPE or as the second argument; without one the measurement is skipped.
# BENCH_SIMRD_ARGS adds options (e.g. "--only unet,lstm --simrd-cache bench/simrd-cache.csv").
if [ "${1:-}" = simrd ]; then
  dtr="${2:-${DTR_PROTOTYPE:-}}"
  if [ -z "$dtr" ] || [ ! -d "$dtr/simrd/simrd" ] || [ ! -d "$dtr/simrd/logs" ]; then
    echo "bench.sh simrd: skipped: no simrd checkout (set DTR_PROTOTYPE or pass the path of uwsampl/dtr-prototype" \
      "with simrd/simrd and the logs unzipped into simrd/logs)" >&2
    exit 0
  fi
  mkdir -p bench
  # shellcheck disable=SC2086  # BENCH_SIMRD_ARGS is a list of options
  python3 scripts/bench_simrd.py --simrd "$dtr/simrd" --logs "$dtr/simrd/logs" --coopsim "$coopsim" \
    --repeat "${BENCH_SIMRD_REPEAT:-3}" ${BENCH_SIMRD_ARGS:-} | tee bench/simrd.md
  exit 0
fi
if [ "${1:-}" = merge ]; then
  mkdir -p bench
  { echo "kind,subject,metric,value,seconds"; bench_merge; } >bench/merge.csv
  column -s, -t bench/merge.csv
  merge_verdict bench/merge.csv
  exit 0
fi
layers="${1:-200}"
iterations="${2:-140}"
mkdir -p bench
"$coopsim" generate -o bench/large.jsonl --set layers="$layers" --set iterations="$iterations"
"$coopsim" generate -o bench/large.jsonl.gz --set layers="$layers" --set iterations="$iterations" >/dev/null
{
  echo "kind,subject,metric,value,seconds"
  for f in bench/large.jsonl bench/large.jsonl.gz; do
    taskset -c 0 "$coopsim" bench "$f" --repeat 3 | awk -F, -v f="$f" '
      $1=="parse"  { printf "parse,%s,lines_per_s,%s,%s\n", f, $3, $5 }
      $1=="replay" && f ~ /jsonl$/ { printf "replay,%s,events_per_s,%s,%s\n", $2, $5, $7 }'
  done
  # Policies at 60 % of the peak on a smaller synthetic trace (recompute policies do far more
  # work per event than keep); events/s counts the events simulated before the run ended.
  "$coopsim" generate -o bench/medium.jsonl --set layers=50 --set iterations=4 >/dev/null
  for p in coop dtr autoswap vdnn pooch capuchin; do
    taskset -c 0 "$coopsim" bench bench/medium.jsonl -a bestfit,pytorch -p "$p" -b 60% --repeat 1 | awk -F, '
      $1=="replay" { printf "replay-policy,%s/%s,events_per_s,%s,%s\n", $2, $3, $5, $7 }'
  done
  # Sweep throughput: 300 runs per trace on two threads; peak RSS from GNU time.
  for t in bert_large densenet121 bilstm; do
    cfg=bench/sweep-$t.json
    printf '{"traces": ["../traces/%s.jsonl.gz"], "allocators": ["bestfit"], "policies": ["coop", "dte", "dtr"],\n "budgets": {"ratios": {"from": 0.01, "to": 1.0, "step": 0.01}}}\n' "$t" >"$cfg"
    rm -rf "bench/sweep-$t"
    /usr/bin/time -f "%e %M" -o bench/time.txt "$coopsim" sweep "$cfg" -j 2 -o "bench/sweep-$t" >/dev/null 2>&1
    read -r secs rss <bench/time.txt
    runs=$(($(grep -c . "bench/sweep-$t/results.csv") - 1))
    awk -v t="$t" -v s="$secs" -v n="$runs" -v r="$rss" 'BEGIN {
      printf "sweep,%s,runs_per_s,%.1f,%s\n", t, n / s, s; printf "rss,sweep-%s,peak_kib,%s,%s\n", t, r, s }'
  done
  /usr/bin/time -f "%e %M" -o bench/time.txt "$coopsim" run bench/large.jsonl -q -a pytorch -b 80GiB
  read -r secs rss <bench/time.txt
  echo "rss,run-large-keep-pytorch,peak_kib,$rss,$secs"
  # Offline planner on random problems where most pairs of buffers are alive together (lower
  # uniform in [0, n), width uniform in [1, n]; about 3 x 10^8 overlapping pairs at n = 30 000):
  # wall time and peak RSS under --time-limit, and the placement checked (docs/limits.md,
  # "Planner").
  for spec in 30000:5 62000:10; do
    n=${spec%%:*}
    limit=${spec#*:}
    python3 -c 'import random, sys
n = int(sys.argv[1]); r = random.Random(1)
print("id,lower,upper,size")
for i in range(n):
    lo = int(r.random() * n)
    print(f"b{i},{lo},{lo + 1 + int(r.random() * n)},{1 + int(r.random() * (1 << 20))}")' "$n" >"bench/plan-$n.csv"
    /usr/bin/time -f "%e %M" -o bench/time.txt "$coopsim" plan "bench/plan-$n.csv" --time-limit "$limit" \
      -o "bench/plan-$n.solution.csv" >/dev/null
    read -r secs rss <bench/time.txt
    "$coopsim" plan --check "bench/plan-$n.csv" "bench/plan-$n.solution.csv" >/dev/null
    echo "plan,random-$n-limit-$limit,seconds,$secs,$secs"
    echo "rss,plan-random-$n,peak_kib,$rss,$secs"
  done
  # Wide traces (issue 18): generated CNNs of 200, 2,000 and 6,000 layers, 3 iterations (26k,
  # 256k, 768k events; BENCH_WIDE_20000=1 adds 20,000 layers, 2.56 M events): wall seconds and
  # peak RSS of smartpool keep at 100 % (its offline planning is the lifetime index's case), and
  # of dtr (dtr-eq) on fungible and coop on bestfit and on pytorch (the default allocator) at
  # 60 %, one core, each cut after
  # BENCH_WIDE_TIMEOUT seconds (default 300; value "timeout"). Subject: layers/allocator/policy/
  # budget/status.
  wide_layers="200 2000 6000"
  [ "${BENCH_WIDE_20000:-0}" = 1 ] && wide_layers="$wide_layers 20000"
  for layers_w in $wide_layers; do
    trace="bench/wide-$layers_w.jsonl.gz"
    [ -f "$trace" ] || "$coopsim" generate -o "$trace" --set layers="$layers_w" --set iterations=3 >/dev/null
    for spec in smartpool:keep:100% fungible:dtr:60% bestfit:coop:60% pytorch:coop:60% pytorch:autoswap:60% \
                pytorch:vdnn:60% pytorch:capuchin:60% pytorch:pooch:60%; do
      IFS=: read -r a p b <<<"$spec"
      limit="${BENCH_WIDE_TIMEOUT:-300}"
      if timeout "$limit" /usr/bin/time -f "%e %M" -o bench/time.txt taskset -c 0 "$coopsim" run "$trace" \
        -a "$a" -p "$p" -b "$b" >bench/wide-run.txt; then
        read -r secs rss <bench/time.txt
        status=$(awk '$1 == "status" { print $2; exit }' bench/wide-run.txt)
        echo "wide,$layers_w-layers/$a/$p/$b/$status,seconds,$secs,$secs"
        echo "rss,wide-$layers_w-layers/$a/$p,peak_kib,$rss,$secs"
      else
        echo "wide,$layers_w-layers/$a/$p/$b/timeout,seconds,timeout,$limit"
      fi
    done
    # Events per second of the simulation alone (trace loaded once), dtr and coop at 60 %
    # (issue 34: 5 M events/s on 6,000 layers); a run stopped early counts the events it simulated.
    for spec in fungible:dtr bestfit:coop; do
      IFS=: read -r a p <<<"$spec"
      timeout "${BENCH_WIDE_TIMEOUT:-300}" taskset -c 0 "$coopsim" bench "$trace" -a "$a" -p "$p" -b 60% --repeat 1 |
        awk -F, -v l="$layers_w" '$1=="replay" { printf "wide-rate,%s-layers/%s/%s/60%%,events_per_s,%s,%s\n", l, $2, $3, $5, $7 }'
    done
  done
  # Bounded work (issue 29, limits.max_search_steps): a chain of 50,000 evictable 1 MiB layers,
  # every one live to the end, at 50 % of its peak (each allocation evicts; Coop's sliding window
  # and DTR's full-neighbourhood heuristic search every candidate). Wall seconds and the status:
  # completed, or limit once the searches pass the cap. Subject: policy/heuristic/status.
  chain=bench/wide-chain-50000.jsonl.gz
  [ -f "$chain" ] || python3 -c 'import gzip, json, sys
n = 50000
with gzip.open(sys.argv[1], "wt") as f:
    f.write(json.dumps({"format": "coopsim-trace", "version": 1}) + "\n")
    f.write(json.dumps({"kind": "tensor", "id": 0, "bytes": 1 << 20, "role": "input"}) + "\n")
    for i in range(1, n + 1):
        f.write(json.dumps({"kind": "tensor", "id": i, "bytes": 1 << 20}) + "\n")
        f.write(json.dumps({"kind": "op", "id": i, "duration": 1000 + i % 7, "inputs": [i - 1], "outputs": [i]}) + "\n")
    f.write(json.dumps({"kind": "alloc", "tensor": 0}) + "\n")
    for i in range(1, n + 1):
        f.write(json.dumps({"kind": "alloc", "tensor": i}) + "\n" + json.dumps({"kind": "compute", "op": i}) + "\n")' "$chain"
  for spec in coop:dtr-eq dtr:dtr dtr:dtr-eq dte:dtr-eq; do
    IFS=: read -r p h <<<"$spec"
    /usr/bin/time -f "%e %M" -o bench/time.txt taskset -c 0 "$coopsim" run "$chain" -a bestfit -p "$p" -b 50% \
      --set dtr.heuristic="$h" >bench/chain-run.txt
    read -r secs rss <bench/time.txt
    status=$(awk '$1 == "status" { print $2; exit }' bench/chain-run.txt)
    echo "bounded,chain-50000/$p/$h/$status,seconds,$secs,$secs"
  done
  # SmartPool's offline planning in tensors (issue 29): n tiny tensors (512 B-8 KiB) all alive
  # together (allocated in turn, then freed in turn), n = 100k-800k, smartpool keep at 100 %,
  # one core. Near-linear: each doubling about doubles the seconds. Subject: tensors.
  for n in 100000 200000 400000 800000; do
    tiny="bench/tiny-together-$n.jsonl.gz"
    [ -f "$tiny" ] || python3 -c 'import gzip, json, sys
n = int(sys.argv[1])
with gzip.open(sys.argv[2], "wt") as f:
    f.write(json.dumps({"format": "coopsim-trace", "version": 1}) + "\n")
    for i in range(n):
        f.write(json.dumps({"kind": "tensor", "id": i, "bytes": 512 * (1 + i * 7 % 16)}) + "\n")
    for kind in ("alloc", "free"):
        for i in range(n):
            f.write(json.dumps({"kind": kind, "tensor": i}) + "\n")' "$n" "$tiny"
    /usr/bin/time -f "%e %M" -o bench/time.txt taskset -c 0 "$coopsim" run "$tiny" -q -a smartpool -b 100% >/dev/null
    read -r secs rss <bench/time.txt
    echo "scaling,smartpool-tiny-together/$n,seconds,$secs,$secs"
    echo "rss,smartpool-tiny-together-$n,peak_kib,$rss,$secs"
  done
  bench_merge
} >bench/results.csv
echo "== bench/results.csv ($(grep -c . bench/large.jsonl) lines, machine: $(nproc) cores, one used)"
column -s, -t bench/results.csv
merge_verdict bench/results.csv
