#!/usr/bin/env bash
# One command from a fresh Debian 12 / Ubuntu machine to coopsim's main job:
# installs missing packages, builds with Meson, simulates the bundled default trace under every
# allocator, runs a small budget sweep, prints a summary table and writes CSVs under out/.
set -eu
cd "$(dirname "$0")/.."
. scripts/deps.sh
coopsim_install_deps

build="${BUILD_DIR:-build}"
[ -f "$build/build.ninja" ] || meson setup "$build" --buildtype=release >/dev/null
ninja -C "$build" src/coopsim >/dev/null
coopsim="$build/src/coopsim"
trace=traces/default.jsonl.gz
mkdir -p out

echo "== trace"
"$coopsim" validate "$trace"
echo
echo "== every allocator, keep policy, 16 GiB budget"
"$coopsim" run "$trace" --allocator all --budget 16GiB --csv out/allocators.csv
echo
echo "== budget sweep (keep policy): where does each allocator run out of memory?"
"$coopsim" run "$trace" --allocator all --budget 1.08GiB,1.1GiB,1.15GiB,1.2GiB,1.5GiB --csv out/budget_sweep.csv
echo
echo "CSV written: out/allocators.csv, out/budget_sweep.csv"
echo "Next: $coopsim run $trace --allocator pytorch     (full report; -o report.json for JSON)"
