#!/usr/bin/env bash
# run.sh STREAMS CHUNKS [BINARY]
#
# Runs bench/manystreams/manystreams.rtfs with STREAMS streams of CHUNKS
# chunks each through one `rtfshost run --data` of BINARY (default: built
# from this tree into a temporary directory) under /usr/bin/time -v, and
# prints the program's result, the data directory's size and the peak RSS:
# the figures of docs/performance.md ("Many streams from one program").
# `rtfshost run` starts the reference server itself. Environment variables
# pass through (GOGC=100 ... to compare GC settings).
set -euo pipefail

if [ $# -lt 2 ]; then
	echo "usage: $0 STREAMS CHUNKS [BINARY]" >&2
	exit 2
fi
streams=$1 chunks=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=${3:-}
if [ -z "$bin" ]; then
	bin=$tmp/rtfshost
	(cd "$here/../.." && go build -o "$bin" ./cmd/rtfshost)
fi
sed -e "s/^(def streams [0-9]*)/(def streams $streams)/" -e "s/^(def chunks [0-9]*)/(def chunks $chunks)/" \
	"$here/manystreams.rtfs" >"$tmp/manystreams.rtfs"
/usr/bin/time -v -o "$tmp/time" "$bin" run --data "$tmp/data" "$tmp/manystreams.rtfs" >"$tmp/out" 2>&1 || {
	tail -20 "$tmp/out" >&2
	exit 1
}
grep '^result:' "$tmp/out"
echo "data directory: $(du -sm "$tmp/data" | cut -f1) MiB"
sed -n 's/^\tMaximum resident set size (kbytes): \(.*\)/peak RSS: \1 KiB/p; s/^\tElapsed (wall clock) time.*: \(.*\)/wall: \1/p' "$tmp/time"
