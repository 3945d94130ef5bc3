#!/usr/bin/env bash
# Benchmark: generates a large synthetic trace (>= 1M events), then measures on one core
#  - parse rate of trace v1 (lines/s), plain and gzip;
#  - replay rate under keep for every allocator (events/s).
# Results: bench/results.csv and a printed summary. Targets: >= 1M lines/s, >= 10M events/s.
#   scripts/bench.sh [LAYERS] [ITERATIONS]
set -eu
cd "$(dirname "$0")/.."
. scripts/deps.sh
coopsim_install_deps
build="${BENCH_BUILD_DIR:-build-release}"
[ -f "$build/build.ninja" ] || meson setup "$build" --buildtype=release -Dtests=disabled >/dev/null
ninja -C "$build" src/coopsim >/dev/null
coopsim="$build/src/coopsim"
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
} >bench/results.csv
echo "== bench/results.csv ($(grep -c . bench/large.jsonl) lines, machine: $(nproc) cores, one used)"
column -s, -t bench/results.csv
