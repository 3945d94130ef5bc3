#!/usr/bin/env bash
# Fuzzes one harness of tests/fuzz/ with libFuzzer (clang, ASan + UBSan) for SECONDS seconds.
#   scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]
#   TARGET: trace | config | dtr | kineto | pickle | plan | hybrid | policy
# Builds in build-fuzz/ (or $FUZZ_BUILD_DIR) with CXX=clang++ and -Dfuzz=true. The checked-in
# seeds tests/fuzz/corpus/TARGET/ are read, never written: new inputs go to
# $FUZZ_BUILD_DIR/corpus/TARGET/, findings to $FUZZ_BUILD_DIR/artifacts/TARGET/ (crash-*, leak-*,
# timeout-*, oom-*). Runs at nice 19 unless FUZZ_NICE says otherwise.
# Re-run one with $FUZZ_BUILD_DIR/tests/fuzz/fuzz_TARGET FILE; keep it as a
# regression input by copying it into tests/fuzz/corpus/TARGET/ under a descriptive name.
set -eu
cd "$(dirname "$0")/.."
targets="trace config dtr kineto pickle plan hybrid policy"
if [ $# -lt 2 ] || ! printf '%s\n' $targets | grep -qx -- "$1" || ! [[ "$2" =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]   (TARGET: ${targets// /, })" >&2
  exit 2
fi
target="$1"
seconds="$2"
shift 2
command -v clang++ >/dev/null || { echo "scripts/fuzz.sh: clang++ not found (apt-get install clang)" >&2; exit 1; }
build="${FUZZ_BUILD_DIR:-build-fuzz}"
if [ ! -f "$build/build.ninja" ]; then
  CXX=clang++ meson setup "$build" --buildtype=debugoptimized -Dfuzz=true -Dtests=disabled -Dcuda=disabled \
    -Db_sanitize=address,undefined -Db_lundef=false \
    "-Dcpp_args=['-fsanitize=fuzzer-no-link','-fno-sanitize-recover=all']" \
    "-Dcpp_link_args=['-fno-sanitize-recover=all']" >/dev/null
fi
ninja -C "$build" -j "${FUZZ_JOBS:-2}" "tests/fuzz/fuzz_$target" >/dev/null
work="$build/corpus/$target"
artifacts="$build/artifacts/$target"
mkdir -p "$work" "$artifacts"
dict=()
[ -f "tests/fuzz/$target.dict" ] && dict=("-dict=tests/fuzz/$target.dict")
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
exec nice -n "${FUZZ_NICE:-19}" "$build/tests/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -workers=1 -print_final_stats=1 -artifact_prefix="$artifacts/" "${dict[@]}" "$@" \
  "$work" "tests/fuzz/corpus/$target"
