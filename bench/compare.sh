#!/usr/bin/env bash
# Runs the chunk path's benchmarks (the table of issue 16) on an older
# revision and on the work tree, interleaved round by round so both see the
# same machine, and prints each figure's median on both sides.
#
#   bash bench/compare.sh REV [ROUNDS [BENCHTIME]]    (defaults: 5 rounds, 1s)
#   CPUS=1,2 bash bench/compare.sh REV ...            (each benchmark at -cpu 1 and 2)
#
# REV is any git revision (it is exported with git archive; the work tree
# is left alone). The benchmarks: BenchmarkPipelineRTFS, BenchmarkProcessorCall
# and BenchmarkProcessorCallParallel (host-ns/chunk and host-cpu-ns/chunk are
# the host's overhead per chunk; the parallel call's ns/op at -cpu 1 over
# -cpu 2 is how the processor scales), BenchmarkPipelinePersist (1 stream
# with and without Badger committing the state and cursor of every chunk;
# 100 streams without a store, and 100 journaling streams with and without
# SyncWrites), BenchmarkSSEIntoProcessor, BenchmarkStartProgress and
# BenchmarkContinuationRoundTrip/readings=50. With CPUS, every benchmark runs
# at each -cpu given and its figures are printed under its name with
# "@" and the count of Ps. The raw output is kept in the directory it
# prints.
set -euo pipefail
rev=${1:?usage: bench/compare.sh REV [ROUNDS [BENCHTIME]]}
rounds=${2:-5}
benchtime=${3:-1s}
cpus=${CPUS:-}
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d "${TMPDIR:-/tmp}/rtfshost-compare.XXXXXX")
old="$out/old-tree"
mkdir -p "$old"
git -C "$root" archive "$rev" | tar -x -C "$old"

# name|package|benchmark pattern
benches=(
  "pipeline|provider|^(BenchmarkPipelineRTFS|BenchmarkProcessorCall|BenchmarkProcessorCallParallel)$"
  "persist1|provider|^BenchmarkPipelinePersist$/^1-streams$/^(none|badger)$/^cursor$"
  "many|provider|^BenchmarkPipelinePersist$/^100-streams$/^none$/^cursor$"
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
        -test.benchtime "$benchtime" -test.benchmem ${cpus:+-test.cpu "$cpus"}) >>"$out/$side.$name.txt"
    done
  done
done

# One line per figure: benchmark, unit, side, value; then the median of
# each benchmark's unit on each side.
echo
printf '%-56s %-18s %14s %14s\n' benchmark unit "$rev" "work tree"
for side in old new; do
  cat "$out/$side".*.txt | awk -v side="$side" -v cpus="$cpus" '/^Benchmark/ {
    name = $1; procs = 1
    if (match(name, /-[0-9]+$/)) { procs = substr(name, RSTART + 1); name = substr(name, 1, RSTART - 1) }
    if (cpus != "") name = name "@" procs
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
