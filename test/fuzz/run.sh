#!/usr/bin/env bash
# make fuzz (docs/fuzz.md): runs every fuzz target of the repository — each
# `func Fuzz…` in a *_test.go file git knows, in every Go module — for
# FUZZTIME each, one after the other. Each package's test binary is built
# once, with the fuzzing instrumentation, and runs each of its targets in
# turn: go test -fuzz would link it again for every target. The corpus each
# run finds is kept in the fuzz cache, so a CI with a warm cache keeps growing it; the seed
# corpora in testdata/fuzz are run as well. A failure fails the run, and go
# test writes the failing input to the package's testdata/fuzz/<target>/,
# where it stays a test case once committed.
#
#   FUZZTIME       time per target (go test -fuzztime), default 4s
#   FUZZ_PARALLEL  fuzzing workers per target, default 1
#   FUZZ_CACHE     corpus cache; default $ONTAP_CSI_E2E_CACHE/fuzz when that
#                  is set, else ${XDG_CACHE_HOME:-~/.cache}/ontap-csi/fuzz
#   FUZZ_ONLY      a regular expression: only the targets it matches
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-4s}
FUZZ_PARALLEL=${FUZZ_PARALLEL:-1}
if [ -z "${FUZZ_CACHE:-}" ]; then
	if [ -n "${ONTAP_CSI_E2E_CACHE:-}" ]; then
		FUZZ_CACHE=$ONTAP_CSI_E2E_CACHE/fuzz
	else
		FUZZ_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/ontap-csi/fuzz
	fi
fi
mkdir -p "$FUZZ_CACHE"
FUZZ_CACHE=$(cd "$FUZZ_CACHE" && pwd) # the targets run in their package's directory
# One run at a time grows a cache; a second waits.
exec 9>"$FUZZ_CACHE/.lock"
flock 9

# module prints the directory of the Go module holding package dir $1.
module() {
	local d=$1
	while [ "$d" != "." ] && [ ! -f "$d/go.mod" ]; do d=$(dirname "$d"); done
	echo "$d"
}

# fuzz_target runs one target. go test's fuzzing coordinator can fail a
# run as its -fuzztime ends, with "context deadline exceeded" and no
# failing input. A failure counts as a finding only when go test wrote the
# input to testdata/fuzz/<target>/; one without gets one more run, and fails
# only when that fails too. The output of a run that is retried is printed
# indented, so that its "--- FAIL" line is not read as the run's failure by
# whoever scans the log for failures (CI does).
#
# It runs the package's binary as go test would: in the package's
# directory, where the seed corpus is read and a failing input written.
fuzz_target() {
	local bin=$1 dir=$2 name=$3 attempt out
	out=$FUZZ_OUT
	for attempt in 1 2; do
		local before after
		before=$(ls "$dir/testdata/fuzz/$name" 2>/dev/null | sort || true)
		if (cd "$dir" && "$bin" -test.run '^$' -test.fuzz "^${name}\$" -test.fuzztime "$FUZZTIME" \
			-test.parallel "$FUZZ_PARALLEL" -test.fuzzcachedir="$FUZZ_CACHE/$dir") >"$out" 2>&1; then
			cat "$out"
			return 0
		fi
		after=$(ls "$dir/testdata/fuzz/$name" 2>/dev/null | sort || true)
		if [ "$before" != "$after" ]; then
			cat "$out"
			echo "fuzz: $name found a failing input:" >&2
			comm -13 <(echo "$before") <(echo "$after") | sed "s|^|  $dir/testdata/fuzz/$name/|" >&2
			return 1
		fi
		if [ "$attempt" = 2 ]; then
			cat "$out"
			echo "fuzz: $name failed twice without a failing input" >&2
			return 1
		fi
		echo "fuzz: $name ended without a failing input (attempt 1, retried); its output:" >&2
		sed 's/^/  | /' "$out" >&2
	done
}

FUZZ_OUT=$(mktemp)
FUZZ_BIN=$(mktemp -d)
declare -A unbuilt # package directories whose test binary did not build
trap 'rm -rf "$FUZZ_OUT" "$FUZZ_BIN"' EXIT
failed=()
count=0
start=$(date +%s)
while IFS= read -r file; do
	dir=$(dirname "$file")
	mod=$(module "$dir")
	pkg=./${dir#"$mod"}
	pkg=${pkg/#.\/\//./}
	bin=$FUZZ_BIN/${dir//\//_}.test
	while IFS= read -r name; do
		if [ -n "${FUZZ_ONLY:-}" ] && ! [[ $name =~ $FUZZ_ONLY ]]; then
			continue
		fi
		count=$((count + 1))
		if [ -n "${unbuilt[$dir]:-}" ] || { [ ! -x "$bin" ] && ! (cd "$mod" && "$GO" test -c -fuzz . -o "$bin" "$pkg"); }; then
			unbuilt[$dir]=1
			failed+=("$name ($dir): its package did not build")
			continue
		fi
		echo "== $name ($dir, $FUZZTIME)"
		if ! fuzz_target "$bin" "$dir" "$name"; then
			failed+=("$name ($dir)")
		fi
	done < <(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file")
done < <(git ls-files -- '*_test.go' | xargs grep -l '^func Fuzz' | sort)

echo "fuzz: $count targets, $(( $(date +%s) - start )) s, corpus in $FUZZ_CACHE"
if [ ${#failed[@]} -gt 0 ]; then
	printf 'FAIL: %s\n' "${failed[@]}" >&2
	exit 1
fi
