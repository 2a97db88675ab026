#!/usr/bin/env bash
# make-upgrade-fixture.sh RELEASE COMMIT [TAGS]
#
# Writes host/testdata/upgrade/RELEASE.tar.gz: a data directory as the
# rtfshost of COMMIT leaves it after a crash, with a stream killed mid-way
# and a program parked on :mcp.stream.await (host/testdata/upgrade/gen says
# exactly what), and RELEASE.txt, its manifest: the commit, its compile
# version and its store format. host/upgrade_fixtures_test.go resumes every
# such fixture with the current build and checks the exact results.
#
# The store format is read from persistence.StoreFormat in COMMIT's tree;
# releases older than that constant give it as STORE_FORMAT (0.1.0: 1,
# 0.2.0: 2, see CHANGELOG.md).
#
# It checks COMMIT out in a temporary git worktree, builds the generator
# there against that revision's packages (with the build TAGS the revision
# needs, see gen/transports*.go), runs it until it kills itself, and tars
# the directory it wrote. A release that changes the store format, the
# continuation format or the compile version adds a fixture (CHANGELOG.md,
# docs/upgrading.md):
#
#   STORE_FORMAT=1 scripts/make-upgrade-fixture.sh v0.1.0 e4dd39c rtfshost_v0_1
#   STORE_FORMAT=2 scripts/make-upgrade-fixture.sh v0.2.0 637ec6b
set -euo pipefail

if [ $# -lt 2 ]; then
	echo "usage: $0 RELEASE COMMIT [TAGS]" >&2
	exit 2
fi
release=$1 commit=$2 tags=${3:-}
root=$(git rev-parse --show-toplevel)
out=$root/host/testdata/upgrade/$release.tar.gz
tmp=$(mktemp -d)
tree=$tmp/tree
cleanup() {
	git -C "$root" worktree remove --force "$tree" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

git -C "$root" worktree add --detach --quiet "$tree" "$commit"
mkdir -p "$tree/cmd/upgradefixture"
cp "$root"/host/testdata/upgrade/gen/*.go "$tree/cmd/upgradefixture/"
(cd "$tree" && go build -tags "$tags" -o "$tmp/gen" ./cmd/upgradefixture)

data=$tmp/data
set +e
"$tmp/gen" "$data"
status=$?
set -e
if [ "$status" -ne 137 ]; then # 128 + SIGKILL: the crash the generator stages
	echo "$0: the generator exited with $status, not by SIGKILL" >&2
	exit 1
fi
rm -f "$data/LOCK"
# Badger preallocates its memtable and value log files; gzip keeps their
# zeros small. The fixture must stay small: check what the tarball weighs.
tar -C "$data" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -czf "$out" .
compile=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' "$tree/rtfs/internal/compile/program.go")
store=$(sed -n 's/^const StoreFormat = \([0-9]*\)$/\1/p' "$tree/persistence/record.go" 2>/dev/null || true)
store=${store:-${STORE_FORMAT:?"$commit has no persistence.StoreFormat: give STORE_FORMAT"}}
{
	echo "release: $release"
	echo "commit: $(git -C "$root" rev-parse "$commit")"
	echo "date: $(git -C "$root" log -1 --format=%ad --date=short "$commit")"
	echo "compile version: $compile"
	echo "store format: $store"
} >"${out%.tar.gz}.txt"
printf '%s\t%s\n' "$(du -h "$out" | cut -f1)" "$out"
cat "${out%.tar.gz}.txt"
