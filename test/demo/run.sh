#!/usr/bin/env bash
# Foundation demo: run ontap-csi in allInOne role on a temp dir until Ctrl-C.
# (The full demo — simulator, kubelet registration, rollouts — replaces this.)
set -euo pipefail
bin=$(realpath "${1:?usage: run.sh path/to/ontap-csi}")
dir=$(mktemp -d /tmp/ontap-csi-demo.XXXXXX)
trap 'rm -rf "$dir"' EXIT
sock="$dir/csi.sock"
echo "ontap-csi demo: serving CSI (allInOne) on $sock"
echo "  health:  curl -s http://127.0.0.1:9808/healthz"
echo "  metrics: curl -s http://127.0.0.1:9808/metrics | grep csi_plugin"
echo "  CSI:     csc identity plugin-info --endpoint unix://$sock   (or any CSI client)"
echo "Ctrl-C stops it and removes $dir."
"$bin" --csi_role=allInOne --csi_node_name="$(hostname)" --csi_endpoint="unix://$sock" \
	--kubelet-dir="$dir/kubelet" --metrics-address=127.0.0.1:9808 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid; rm -rf "$dir"' EXIT INT TERM
wait $pid
