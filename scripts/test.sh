#!/usr/bin/env bash
# Builds coopsim and runs the whole test suite. The last line is "N passed, N failed", counting
# Catch2 test cases (TAP) plus any non-TAP tests. Exit status 0 only when nothing failed.
#   scripts/test.sh              # build dir: build/
#   BUILD_DIR=build-x scripts/test.sh
#   scripts/test.sh --sanitize   # ASan + UBSan build in build-sanitize/ (or $BUILD_DIR), CUDA off,
#                                # any sanitizer report fails the test; COOPSIM_SANITIZE=1 is
#                                # exported so that the slowest suites run fewer budgets
set -u
cd "$(dirname "$0")/.."
sanitize=0
case "${1:-}" in
  --sanitize) sanitize=1 ;;
  "") ;;
  *) echo "usage: scripts/test.sh [--sanitize]" >&2; echo "0 passed, 1 failed"; exit 2 ;;
esac
. scripts/deps.sh
coopsim_install_deps || { echo "0 passed, 1 failed"; exit 1; }
# The recorder's suite on PyPI's torch 2.x (meson test 'python-torch2'), in the normal pass only:
# its tests are Python, which the sanitizers do not look into. Without the environment (no network)
# the suite fails under CI and skips elsewhere.
if [ $sanitize -eq 0 ]; then
  coopsim_torch2_venv || echo "note: no torch 2.x environment; the suite python-torch2 will not run" >&2
fi

# -g1: line tables only (backtraces and sanitizer reports keep file:line); full -g makes every
# object three times larger and the build a quarter slower.
# Unity build (12 files compiled as one): each library's files share one expansion of the
# JSON, fmt and standard headers and one instantiation of their templates, which cuts the build
# several times over (the ASan + UBSan build most). Sources must not clash when concatenated:
# file-local helpers of the tests live in a namespace named after the file.
setup_args=(--buildtype=debugoptimized -Dunity=on -Dunity_size=12)
if [ $sanitize -eq 1 ]; then
  build="${BUILD_DIR:-build-sanitize}"
  # -fno-sanitize-recover: UBSan findings abort like ASan's instead of printing and going on.
  # -Dpython=disabled: an instrumented native module cannot load into Python (the ASan runtime
  # must come first); the Python suite runs the executable instead.
  setup_args+=(-Dcuda=disabled -Dpython=disabled -Db_sanitize=address,undefined
               "-Dcpp_args=['-g1','-fno-sanitize-recover=all']" "-Dcpp_link_args=['-fno-sanitize-recover=all']")
  export COOPSIM_SANITIZE=1
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
else
  build="${BUILD_DIR:-build}"
  setup_args+=("-Dcpp_args=['-g1']")
fi
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "${setup_args[@]}" >/dev/null || { echo "meson setup failed"; echo "0 passed, 1 failed"; exit 1; }
elif [ $sanitize -eq 1 ]; then
  meson configure "$build" "${setup_args[@]:1}" >/dev/null || { echo "meson configure failed"; echo "0 passed, 1 failed"; exit 1; }
fi
if ! ninja -C "$build" >"$build/ninja.log" 2>&1; then
  tail -n 40 "$build/ninja.log"
  echo "build failed"
  echo "0 passed, 1 failed"
  exit 1
fi
# LeakSanitizer cannot start where ptrace is not permitted (some containers): go on without leak
# checks there, and say so.
if [ $sanitize -eq 1 ] && [[ "$ASAN_OPTIONS" == *detect_leaks=1* ]] && ! "$build/src/coopsim" list >/dev/null 2>"$build/lsan-probe.log"; then
  if grep -q "LeakSanitizer has encountered a fatal error\|LeakSanitizer does not work under ptrace" "$build/lsan-probe.log"; then
    echo "note: LeakSanitizer cannot run here (ptrace restricted); leak checks are off" >&2
    export ASAN_OPTIONS="${ASAN_OPTIONS//detect_leaks=1/detect_leaks=0}"
  fi
fi
meson test -C "$build" --print-errorlogs --num-processes "$(nproc)" >"$build/meson-test.log" 2>&1
status=$?
grep -E "^ *[0-9]+/[0-9]+ " "$build/meson-test.log" | grep -v " OK " | head -n 40
python3 scripts/tap_summary.py "$build/meson-logs/testlog.json"
summary_status=$?
[ $status -eq 0 ] && [ $summary_status -eq 0 ]
