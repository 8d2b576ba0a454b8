package main

import (
	"strings"
	"testing"
)

// tridentContainers are the exact argument lists of Trident's trident-main
// container (docs/design/trident-compat.md §2.1–2.3, from cli/k8s_client/yaml_factory.go
// with the operator's default values filled in). $(VAR) references are
// expanded by the test like kubelet does.
var tridentContainers = []struct {
	name    string
	role    string
	args    []string
	ignored []string // some flags the log must name as ignored; none: no such line
}{
	{
		name: "20.10 node DaemonSet",
		role: roleNode,
		args: []string{
			"--no_persistence",
			"--rest=false",
			"--csi_node_name=$(KUBE_NODE_NAME)",
			"--csi_endpoint=$(CSI_ENDPOINT)",
			"--csi_role=node",
			"--log_format=text",
			"--node_prep=true",
		},
		ignored: []string{"--no_persistence=true", "--node_prep=true"},
	},
	{
		name: "20.10 node DaemonSet with debug",
		role: roleNode,
		args: []string{
			"--no_persistence",
			"--rest=false",
			"--csi_node_name=$(KUBE_NODE_NAME)",
			"--csi_endpoint=$(CSI_ENDPOINT)",
			"--csi_role=node",
			"--log_format=json",
			"--node_prep=false",
			"-debug",
		},
		ignored: []string{"--node_prep=false"},
	},
	{
		name: "20.10 controller Deployment",
		role: roleController,
		args: []string{
			"--crd_persistence",
			"--k8s_pod",
			"--https_rest",
			"--https_port=8443",
			"--csi_node_name=$(KUBE_NODE_NAME)",
			"--csi_endpoint=$(CSI_ENDPOINT)",
			"--csi_role=controller",
			"--log_format=text",
			"--address=127.0.0.1",
			"--metrics",
		},
		ignored: nil, // every flag of it is implemented
	},
	{
		name: "26.06 node DaemonSet",
		role: roleNode,
		args: []string{
			"--no_persistence",
			"--k8s_pod",
			"--rest=false",
			"--csi_node_name=$(KUBE_NODE_NAME)",
			"--csi_endpoint=$(CSI_ENDPOINT)",
			"--csi_role=node",
			"--log_format=text",
			"--log_level=info",
			"--log_workflows=",
			"--log_layers=",
			"--disable_audit_log=true",
			"--http_request_timeout=1m30s",
			"--https_rest",
			"--https_port=17546",
			"--enable_force_detach=false",
			"--iscsi_self_healing_interval=5m0s",
			"--iscsi_self_healing_wait_time=7m0s",
			"-debug",
			"--k8s_api_qps=100.0",
			"--k8s_api_burst=200",
		},
		ignored: []string{"--iscsi_self_healing_interval=5m0s", "--log_workflows="},
	},
	{
		name: "26.06 controller Deployment",
		role: roleController,
		args: []string{
			"--crd_persistence",
			"--k8s_pod",
			"--https_rest",
			"--https_port=8443",
			"--csi_node_name=$(KUBE_NODE_NAME)",
			"--csi_endpoint=$(CSI_ENDPOINT)",
			"--csi_role=controller",
			"--log_format=text",
			"--log_level=info",
			"--log_workflows=",
			"--log_layers=",
			"--disable_audit_log=true",
			"--address=127.0.0.1",
			"--http_request_timeout=1m30s",
			"--enable_force_detach=false",
			"--enable_concurrency=false",
			"--metrics",
			"-debug",
			"--k8s_api_qps=100.0",
			"--k8s_api_burst=200",
		},
		ignored: []string{"--enable_concurrency=false", "--disable_audit_log=true", "--log_workflows="},
	},
}

// implementedTridentFlags must never be logged as ignored.
var implementedTridentFlags = []string{
	"--crd_persistence", "--k8s_pod", "--k8s_api_server", "--k8s_api_qps", "--k8s_api_burst",
	"--rest=", "--address", "--port", "--https_rest", "--https_address", "--https_port",
	"--https_ca_cert", "--https_server_cert", "--https_server_key", "--https_client_cert", "--https_client_key",
	"--enable_force_detach",
}

// checkIgnoredFlags checks the one log line naming the ignored Trident flags.
func checkIgnoredFlags(t *testing.T, logs string, ignored []string) {
	t.Helper()
	line := ""
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "ignoring Trident flags") {
			if line != "" {
				t.Errorf("ignored Trident flags logged more than once:\n%s", logs)
			}
			line = l
		}
	}
	if len(ignored) == 0 && line != "" {
		t.Errorf("flags logged as ignored, but all are implemented: %s", line)
	}
	if len(ignored) > 0 && line == "" {
		t.Errorf("ignored Trident flags not logged:\n%s", logs)
	}
	for _, want := range ignored {
		if !strings.Contains(line, want) {
			t.Errorf("log does not name ignored flag %s: %s", want, line)
		}
	}
	for _, f := range implementedTridentFlags {
		if strings.Contains(line, f) {
			t.Errorf("implemented flag %s logged as ignored: %s", f, line)
		}
	}
}
