#!/usr/bin/env bash
# make kubelet: the handover scenarios against each kubelet version's own
# code. The version modules run at the same time: their scenarios mostly
# wait (grace periods, kubelet's 1 s reconcile), and each node lives in its
# own temp root. v1.37.2 runs everything in full; the older versions run
# every scenario with a shorter S4 wait and 20 rolling updates in S11.
#
#   ONTAP_CSI_BINARY=bin/ontap-csi test/kubelet/run.sh
#
#   KUBELET_MODULES  the version modules to run, default ". k8s-1.29 k8s-1.19"
#                    (make test runs v1.37.2 in one lane, the older two in
#                    the other); the harness's own tests run with "."
#   KUBELET_PARALLEL scenarios at once per module, default 4
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

known=". k8s-1.29 k8s-1.19"
read -r -a modules <<<"${KUBELET_MODULES:-$known}"
for m in "${modules[@]}"; do
	if [[ " $known " != *" $m "* ]]; then
		echo "KUBELET_MODULES: no module $m (one of: $known)" >&2
		exit 2
	fi
done

if [[ " ${modules[*]} " == *" . "* ]]; then
	echo "== test/kubelet/harness"
	(cd harness && $go vet ./... && $go test -count=1 ./...)
fi

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
declare -A pids
run() { # module, extra args
	local m=$1
	shift
	(cd "$m" && $go vet ./... && $go test -count=1 -timeout 30m -parallel "$parallel" ./... "$@") >"$logs/${m//\//_}.log" 2>&1 &
	pids[$m]=$!
}
for m in "${modules[@]}"; do
	if [ "$m" = . ]; then
		run . # v1.37.2, in full
	else
		run "$m" -args -s4-wait=15s -s11-updates=20
	fi
done

failed=0
for m in "${modules[@]}"; do
	if wait "${pids[$m]}"; then status=ok; else status=FAIL; failed=1; fi
	echo "== test/kubelet/$m: $status"
	if [ $status = FAIL ]; then cat "$logs/${m//\//_}.log"; else grep -E '^(ok|---)' "$logs/${m//\//_}.log" || true; fi
done
exit $failed
