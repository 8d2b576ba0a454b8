package localcluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// containerdConfig is Debian's containerd 1.6 with everything under the
// node's root (docs/design/local-cluster.md §3.3). /run and /opt are private to the
// node's mount namespace, so the shim sockets in /run/containerd/s and the
// "opt" plugin's directory never reach the host either.
func (n *Node) writeContainerdConfig() (string, error) {
	dir := filepath.Join(n.Root, "containerd")
	content := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = %[3]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  # No CAP_SYS_RESOURCE on these machines: without this every sandbox fails
  # to lower its oom_score_adj (docs/design/local-cluster.md §1).
  restrict_oom_score_adj = true
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "/usr/sbin/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[6]q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), n.ContainerdSocket,
		filepath.Join(dir, "opt"), PauseImage, filepath.Join(n.Root, "cni", "net.d"))
	path := filepath.Join(dir, "config.toml")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, []byte(content), 0o644)
}

// writeCNIConfig writes the bridge network. The node stays NotReady without
// any CNI configuration, even with only hostNetwork pods (docs/design/local-cluster.md
// §3.7); the bridge lives in the node's network namespace, with the node's
// own pod subnet (the other nodes route theirs to them: Cluster.connect).
func (n *Node) writeCNIConfig() error {
	dir := filepath.Join(n.Root, "cni", "net.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "e2e",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": n.PodCIDR}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": filepath.Join(n.Root, "cni", "ipam"),
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "10-e2e.conflist"), b, 0o644)
}

// writeKubeletConfig follows docs/design/local-cluster.md §3.6. The kubelet's root
// directory is the default /var/lib/kubelet, which in the node's mount
// namespace is the node root's kubelet/: the CSI manifests and the
// registration protocol use that path as on any node.
func (n *Node) writeKubeletConfig() (string, error) {
	dir := filepath.Join(n.Root, "kubelet-config")
	c := n.c
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	content := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[1]q}
authorization: {mode: Webhook}
tlsCertFile: %[2]q
tlsPrivateKeyFile: %[3]q
cgroupDriver: cgroupfs
# Every pod cgroup below the test's own root, removed at teardown.
cgroupRoot: /%[4]s
containerRuntimeEndpoint: unix://%[5]s
failSwapOn: false
clusterDomain: cluster.local
# There is no cluster DNS; naming an address in the service range keeps the
# kubelet from warning on every pod, and a lookup from a pod stays inside
# the node's network namespace and fails there.
clusterDNS: [%[7]q]
resolvConf: /etc/resolv.conf
# Else the kubelet creates /usr/libexec/kubernetes on the host.
volumePluginDir: %[6]q
syncFrequency: 10s
nodeStatusUpdateFrequency: 5s
# The imported images cannot be pulled again: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
serializeImagePulls: false
maxPods: 50
`, c.pki.CAFile(), c.pki.path(n.Name+"-kubelet-serving.crt"), c.pki.path(n.Name+"-kubelet-serving.key"), n.cgroupName,
		n.ContainerdSocket, filepath.Join(n.Root, "volume-plugins"), clusterDNSIP)
	path := filepath.Join(dir, "config.yaml")
	return path, os.WriteFile(path, []byte(content), 0o644)
}
