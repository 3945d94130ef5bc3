#!/usr/bin/env bash
# Regenerates the figures of docs/user-guide.md (docs/figures/*.png) from the bundled traces:
# sweeps configs/coop-matrix.json and configs/smartpool-matrix.json, then scripts/plot.py; and
# docs/results-coop-paper.md's figure (scripts/coop_paper.py over configs/coop-paper/).
#   scripts/make_figures.sh              # build dir build/ (BUILD_DIR=...), every core (JOBS=N)
# Needs python3-matplotlib (installed through scripts/deps.sh when missing). The sweeps take
# about 40 s of CPU time; the figures depend only on the sweeps' CSV files.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
coopsim_install_deps python3-matplotlib

build="${BUILD_DIR:-build}"
[ -f "$build/build.ninja" ] || meson setup "$build" --buildtype=debugoptimized >/dev/null
ninja -C "$build" ${JOBS:+-j "$JOBS"} src/coopsim >/dev/null
# Debian's matplotlib lives in /usr/bin/python3; another python3 may come first on PATH.
python=python3
"$python" -c 'import matplotlib' 2>/dev/null || python=/usr/bin/python3

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for matrix in coop smartpool; do
  "$build/src/coopsim" sweep "configs/$matrix-matrix.json" ${JOBS:+-j "$JOBS"} -o "$work/$matrix" \
    2>"$work/$matrix.log" || { tail -n 3 "$work/$matrix.log"; exit 1; }
  "$python" scripts/plot.py "$work/$matrix" -o "$work/$matrix-plots" >/dev/null
done
mkdir -p docs/figures
for f in overhead_vs_memory fragmentation search minbudget; do
  cp "$work/coop-plots/$f.png" "docs/figures/coop-$f.png"
done
for f in peak_reserved minbudget; do
  cp "$work/smartpool-plots/$f.png" "docs/figures/smartpool-$f.png"
done
# Coop's eight panels as OneFlow ran them (docs/results-coop-paper.md)
"$python" scripts/coop_paper.py --coopsim "$build/src/coopsim" ${JOBS:+--jobs "$JOBS"} \
  --figure docs/figures/coop-paper.png --tables "$work/coop-paper.md"
ls docs/figures/*.png
