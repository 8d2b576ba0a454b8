// Package deploy holds ontap-csi's installation manifests and their tests;
// it has no Go API.
//
//	kustomize/base        namespace, RBAC, CSIDriver, controller, node plugin
//	kustomize/ha          the base with two controller replicas and leader election
//	kustomize/uninstall   deregisters the driver on every node before removal
//	kustomize/trident-node  the node plugin alone, into an existing Trident install
//	helm/ontap-csi        a Helm chart rendering the same objects as the base
//	examples/             backend Secrets and StorageClasses
//	grafana/              a Grafana dashboard of Trident's metric series as ontap-csi serves them
//	tools/                the pinned kustomize and Helm (a module of its own)
//
// The tests render the kustomize directories and the chart with the pinned
// tools, decode every object strictly into k8s.io/api types, check the
// properties the node plugin's registration handover relies on, and start the
// real binary with the rendered arguments, environment and mounts.
package deploy
