#!/usr/bin/env bash
# make kubelet: the handover scenarios against each kubelet version's own
# code. The version modules run at the same time: their scenarios mostly
# wait (grace periods, kubelet's 1 s reconcile), and each node lives in its
# own temp root. v1.37.2 runs everything in full; the older versions run
# every scenario with a shorter S4 wait and 20 rolling updates in S11.
#
#   ONTAP_CSI_BINARY=bin/ontap-csi test/kubelet/run.sh
set -euo pipefail
cd "$(dirname "$0")"
: "${ONTAP_CSI_BINARY:?set ONTAP_CSI_BINARY to the binary under test}"
export ONTAP_CSI_BINARY
go=${GO:-go}
# Scenarios at once per module. They mostly wait, and S11 (its rolling
# updates, about 130 s) and S4 (its minute without a plugin) are each as
# long as the rest of the module together: at go test's default (the CPUs,
# 2 here) they came last, after the short ones, and v1.37.2's module took
# 233 s alone.
parallel=${KUBELET_PARALLEL:-4}

echo "== test/kubelet/harness"
(cd harness && $go vet ./... && $go test -count=1 ./...)

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
declare -A pids
run() { # module, extra args
	local m=$1
	shift
	(cd "$m" && $go vet ./... && $go test -count=1 -timeout 30m -parallel "$parallel" ./... "$@") >"$logs/${m//\//_}.log" 2>&1 &
	pids[$m]=$!
}
run . # v1.37.2
run k8s-1.29 -args -s4-wait=15s -s11-updates=20
run k8s-1.19 -args -s4-wait=15s -s11-updates=20

failed=0
for m in . k8s-1.29 k8s-1.19; do
	if wait "${pids[$m]}"; then status=ok; else status=FAIL; failed=1; fi
	echo "== test/kubelet/$m: $status"
	if [ $status = FAIL ]; then cat "$logs/${m//\//_}.log"; else grep -E '^(ok|---)' "$logs/${m//\//_}.log" || true; fi
done
exit $failed
