#!/usr/bin/env bash
# Writes a PyTorch memory snapshot pickle of about SIZE MB (10^6 bytes) for benchmarks: a
# generated training trace (`coopsim generate`, LAYERS layers, default 200) simulated under keep
# on the pytorch allocator and exported with `coopsim run --torch-snapshot` (torch 2.x layout:
# segments, the full history in device_traces[0], frames per entry). The number of iterations
# is scaled from a one-iteration calibration run, so the size is approximate (a few per cent).
# Snapshots of hundreds of MB are for bench/ or /tmp, never for the repository.
#   scripts/make_snapshot.sh COOPSIM SIZE_MB OUT.pickle [LAYERS]
set -eu
if [ $# -lt 3 ]; then
  echo "usage: scripts/make_snapshot.sh COOPSIM SIZE_MB OUT.pickle [LAYERS]" >&2
  exit 2
fi
coopsim=$1
size_mb=$2
out=$3
layers=${4:-200}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
snapshot_of() {  # ITERATIONS OUT
  "$coopsim" generate -o "$work/t.jsonl" --set layers="$layers" --set iterations="$1" >/dev/null
  "$coopsim" run "$work/t.jsonl" -q -p keep -a pytorch -b 1000GiB --torch-snapshot "$2"
}
snapshot_of 1 "$work/one.pickle"
snapshot_of 2 "$work/two.pickle"
one=$(stat -c %s "$work/one.pickle")
per_iteration=$(($(stat -c %s "$work/two.pickle") - one))
iterations=$(awk -v t="$size_mb" -v o="$one" -v p="$per_iteration" \
  'BEGIN { n = int((t * 1e6 - o) / p + 1.5); print (n < 1 ? 1 : n) }')
snapshot_of "$iterations" "$out"
echo "$out: $(stat -c %s "$out") bytes ($layers layers, $iterations iterations)"
