#!/usr/bin/env bash
# Controller ONTAP round trips (issue 18): TestControllerRoundTrips
# (test/sanity: 40 volumes created, published, unpublished and deleted, 8
# calls in parallel, simulator with realistic latency) of this tree against
# a base commit, the arms alternating (base-new, then new-base, …) in the
# same run on the same machine. Both arms run this tree's
# roundtrips_test.go. Prints a Markdown table (test/bench/roundtrips), or
# writes it to $ONTAP_CSI_BENCH_OUT.
#
#   test/bench/roundtrips.sh [base] [runs]
#
# base defaults to e5f6d06, main before issue 18's round-trip work; runs
# to 5 per arm (each takes about a minute, mostly the injected latency).
set -euo pipefail
cd "$(dirname "$0")/../.."
base=${1:-e5f6d06d8d9a390624fd8d59117a66f383f1bcef}
runs=${2:-5}
work=$(mktemp -d /tmp/ontap-csi-roundtrips.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/base"
git archive "$base" | tar -x -C "$work/base"
cp test/sanity/roundtrips_test.go "$work/base/test/sanity/"
go test -c -o "$work/new.test" ./test/sanity
(cd "$work/base" && go test -c -o "$work/base.test" ./test/sanity)
declare -A dir=([base]="$work/base/test/sanity" [new]="$PWD/test/sanity")
for i in $(seq "$runs"); do
	order="base new"
	[ $((i % 2)) -eq 1 ] || order="new base"
	for arm in $order; do
		echo ">> run $i: $arm" >&2
		(cd "${dir[$arm]}" && ONTAP_CSI_BENCH=1 "$work/$arm.test" -test.run '^TestControllerRoundTrips$' -test.count=1 -test.v) >"$work/log" 2>&1 ||
			{ tail -50 "$work/log" >&2; exit 1; }
		sed -nE 's/^[[:space:]]+roundtrips_test\.go:[0-9]+: (\| ontap.*)$/\1/p' "$work/log" | sed "s/^/$arm $i /" >>"$work/rows"
	done
done
go run ./test/bench/roundtrips <"$work/rows" >"$work/table.md"
if [ -n "${ONTAP_CSI_BENCH_OUT:-}" ]; then
	cp "$work/table.md" "$ONTAP_CSI_BENCH_OUT"
else
	cat "$work/table.md"
fi
