#!/usr/bin/env bash
# Runs rtfshost's pipeline benchmarks and the peers' (Benthos, Starlark)
# interleaved, round by round, and prints the medians and the ratios.
#
#   bash bench/peers/run.sh [ROUNDS [BENCHTIME]]     (defaults: 10 rounds, 1s)
#
# Each round runs rtfshost's BenchmarkPipelineRTFS and BenchmarkProcessorCall
# (package provider) once, then the peers' three one-stream benchmarks once,
# then the 100-stream case at -cpu 1 and 2 on each side (rtfshost's
# BenchmarkPipelinePersist/100-streams/none/cursor, the peers'
# BenchmarkBenthosStreams and BenchmarkStarlarkStreams), so both sides see
# the same machine. Needs Go and the module proxy (or a filled
# module cache) for the peers' dependencies; the raw output is kept in the
# directory it prints.
set -euo pipefail
rounds=${1:-10}
benchtime=${2:-1s}
peers=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$peers/../.." && pwd)
out=$(mktemp -d "${TMPDIR:-/tmp}/rtfshost-peers.XXXXXX")

echo "building the benchmarks (output in $out)"
(cd "$root" && go test -c -o "$out/rtfshost.test" ./provider)
(cd "$peers" && go test -c -o "$out/peers.test" .)

for ((r = 1; r <= rounds; r++)); do
  echo "round $r/$rounds"
  (cd "$root/provider" && "$out/rtfshost.test" -test.run '^$' \
    -test.bench '^(BenchmarkPipelineRTFS|BenchmarkProcessorCall)$' \
    -test.benchtime "$benchtime" -test.benchmem) >"$out/rtfshost.$r.txt"
  (cd "$peers" && "$out/peers.test" -test.run '^$' -test.bench 'Pipeline$|Call$' \
    -test.benchtime "$benchtime" -test.benchmem) >"$out/peers.$r.txt"
  (cd "$root/provider" && "$out/rtfshost.test" -test.run '^$' \
    -test.bench '^BenchmarkPipelinePersist$/^100-streams$/^none$/^cursor$' \
    -test.benchtime "$benchtime" -test.benchmem -test.cpu 1,2) >"$out/rtfshost-many.$r.txt"
  (cd "$peers" && "$out/peers.test" -test.run '^$' -test.bench 'Streams$' \
    -test.benchtime "$benchtime" -test.benchmem -test.cpu 1,2) >"$out/peers-many.$r.txt"
done
echo
(cd "$peers" && go run ./cmd/ratios "$out")
