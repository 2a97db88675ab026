#!/usr/bin/env bash
# Runs the chunk path's benchmarks (the table of issue 16) on an older
# revision and on the work tree, interleaved round by round so both see the
# same machine, and prints each figure's median on both sides.
#
#   bash bench/compare.sh REV [ROUNDS [BENCHTIME]]    (defaults: 5 rounds, 1s)
#
# REV is any git revision (it is exported with git archive; the work tree
# is left alone). The benchmarks: BenchmarkPipelineRTFS and
# BenchmarkProcessorCall (host-ns/chunk is the host's overhead per chunk),
# BenchmarkPipelinePersist (1 stream with and without Badger committing the
# state and cursor of every chunk; 100 journaling streams with and without
# SyncWrites), BenchmarkSSEIntoProcessor, BenchmarkStartProgress and
# BenchmarkContinuationRoundTrip/readings=50. The raw output is kept in the
# directory it prints.
set -euo pipefail
rev=${1:?usage: bench/compare.sh REV [ROUNDS [BENCHTIME]]}
rounds=${2:-5}
benchtime=${3:-1s}
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d "${TMPDIR:-/tmp}/rtfshost-compare.XXXXXX")
old="$out/old-tree"
mkdir -p "$old"
git -C "$root" archive "$rev" | tar -x -C "$old"

# name|package|benchmark pattern
benches=(
  "pipeline|provider|^(BenchmarkPipelineRTFS|BenchmarkProcessorCall)$"
  "persist1|provider|^BenchmarkPipelinePersist$/^1-streams$/^(none|badger)$/^cursor$"
  "persist100|provider|^BenchmarkPipelinePersist$/^100-streams$/^badger(-sync)?$/^journal$"
  "sse|transport/sse|^BenchmarkSSEIntoProcessor$"
  "progress|host/mcpserver|^BenchmarkStartProgress$"
  "continuation|rtfs|^BenchmarkContinuationRoundTrip$/^readings=50$"
)

echo "building the benchmarks of $rev and of the work tree (output in $out)"
for side in old new; do
  tree=$old
  [ "$side" = new ] && tree=$root
  for pkg in provider transport/sse host/mcpserver rtfs; do
    (cd "$tree" && go test -c -o "$out/$side.${pkg//\//_}.test" "./$pkg")
  done
done

for ((r = 1; r <= rounds; r++)); do
  echo "round $r/$rounds"
  for side in old new; do
    tree=$old
    [ "$side" = new ] && tree=$root
    for b in "${benches[@]}"; do
      IFS='|' read -r name pkg pattern <<<"$b"
      (cd "$tree/$pkg" && "$out/$side.${pkg//\//_}.test" -test.run '^$' -test.bench "$pattern" \
        -test.benchtime "$benchtime" -test.benchmem) >>"$out/$side.$name.txt"
    done
  done
done

# One line per figure: benchmark, unit, side, value; then the median of
# each benchmark's unit on each side.
echo
printf '%-56s %-18s %14s %14s\n' benchmark unit "$rev" "work tree"
for side in old new; do
  cat "$out/$side".*.txt | awk -v side="$side" '/^Benchmark/ {
    name = $1; sub(/-[0-9]+$/, "", name)
    for (i = 3; i < NF; i += 2) if ($(i+1) != "B/op") print name, $(i+1), side, $i
  }'
done | sort -k1,1 -k2,2 -k3,3 -k4,4g | awk '
  function flush() {
    if (key == "") return
    m = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    med[key] = m
    if (!(fig in seen)) { seen[fig] = 1; order[++nf] = fig }
  }
  { k = $1 " " $2 " " $3
    if (k != key) { flush(); key = k; fig = $1 " " $2; n = 0 }
    v[++n] = $4 }
  END {
    flush()
    for (i = 1; i <= nf; i++) {
      split(order[i], p, " ")
      printf "%-56s %-18s %14.1f %14.1f\n", p[1], p[2], med[order[i] " old"], med[order[i] " new"]
    }
  }'
