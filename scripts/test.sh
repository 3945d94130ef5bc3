#!/usr/bin/env bash
# Builds coopsim and runs the whole test suite. The last line is "N passed, N failed", counting
# Catch2 test cases (TAP) plus any non-TAP tests. Exit status 0 only when nothing failed.
#   scripts/test.sh              # build dir: build/
#   BUILD_DIR=build-x scripts/test.sh
set -u
cd "$(dirname "$0")/.."
. scripts/deps.sh
coopsim_install_deps || { echo "0 passed, 1 failed"; exit 1; }

build="${BUILD_DIR:-build}"
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" --buildtype=debugoptimized >/dev/null || { echo "meson setup failed"; echo "0 passed, 1 failed"; exit 1; }
fi
if ! ninja -C "$build" >"$build/ninja.log" 2>&1; then
  tail -n 40 "$build/ninja.log"
  echo "build failed"
  echo "0 passed, 1 failed"
  exit 1
fi
meson test -C "$build" --print-errorlogs --num-processes "$(nproc)" >"$build/meson-test.log" 2>&1
status=$?
grep -E "^ *[0-9]+/[0-9]+ " "$build/meson-test.log" | grep -v " OK " | head -n 40
python3 scripts/tap_summary.py "$build/meson-logs/testlog.json"
summary_status=$?
[ $status -eq 0 ] && [ $summary_status -eq 0 ]
