package deploy

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/ontap-csi/ontap-csi/nodeinfo"
)

// allowedRBAC is every permission ontap-csi's manifests may grant, per
// role, as "group/resource:verb". It is the sidecars' upstream RBAC
// (deploy/kubernetes/rbac*.yaml of csi-provisioner v6.3.0, csi-attacher
// v4.11.0, csi-resizer v2.1.0, csi-snapshotter v8.6.0) minus what ontap-csi
// does not use, plus the node plugin's reads. Left out on purpose:
//   - secrets: no StorageClass or VolumeSnapshotClass names *-secret-name;
//     backend credentials are mounted, not read through the API.
//   - csistoragecapacities, pods and replicasets for the provisioner,
//     unless capacity tracking is turned on (kustomize/capacity, Helm
//     storageCapacity=true: Role/ontap-csi-provisioner-capacity, in the
//     controller's namespace, as upstream's rbac.yaml has them in a Role).
//   - nothing for VolumeAttributesClasses beyond what ControllerModifyVolume
//     needs (below).
//   - groupsnapshot.storage.k8s.io, unless group snapshots are turned on
//     (kustomize/group-snapshots, Helm groupSnapshots=true): csi-snapshotter's
//     feature gate CSIVolumeGroupSnapshot is off by default.
//   - events list/watch/update: client-go's recorder only creates and
//     patches (aggregated repeats).
//   - leases list/watch/delete: client-go's Lease lock gets, creates and
//     updates.
//
// The ontap-csi controller itself gets and lists Nodes and lists PVs and
// StorageClasses (ClusterRole/ontap-csi-controller)
// and, with --crd_persistence, Trident's resources (Role/ontap-csi-controller).
// A change here must name the code path that needs it.
var allowedRBAC = map[string][]string{
	// csi-provisioner: PVs it creates and deletes, claims (update: the
	// clone-protection finalizer), classes, events, snapshot sources (update:
	// source-protection finalizer and its orphan sweep), topology from
	// CSINode and Node, VolumeAttachments (no delete while attached), and
	// the VolumeAttributesClass a claim names (one get per CreateVolume:
	// its parameters become the request's mutable_parameters).
	"ClusterRole/ontap-csi-provisioner": {
		"/persistentvolumes:get", "/persistentvolumes:list", "/persistentvolumes:watch",
		"/persistentvolumes:create", "/persistentvolumes:patch", "/persistentvolumes:delete",
		"/persistentvolumeclaims:get", "/persistentvolumeclaims:list", "/persistentvolumeclaims:watch", "/persistentvolumeclaims:update",
		"storage.k8s.io/storageclasses:get", "storage.k8s.io/storageclasses:list", "storage.k8s.io/storageclasses:watch",
		"storage.k8s.io/volumeattributesclasses:get",
		"/events:create", "/events:patch",
		"snapshot.storage.k8s.io/volumesnapshots:get", "snapshot.storage.k8s.io/volumesnapshots:list",
		"snapshot.storage.k8s.io/volumesnapshots:watch", "snapshot.storage.k8s.io/volumesnapshots:update",
		"snapshot.storage.k8s.io/volumesnapshotcontents:get", "snapshot.storage.k8s.io/volumesnapshotcontents:list",
		"storage.k8s.io/csinodes:get", "storage.k8s.io/csinodes:list", "storage.k8s.io/csinodes:watch",
		"/nodes:get", "/nodes:list", "/nodes:watch",
		"storage.k8s.io/volumeattachments:get", "storage.k8s.io/volumeattachments:list", "storage.k8s.io/volumeattachments:watch",
	},
	// csi-attacher: PV finalizer, node ID from CSINode, VolumeAttachment
	// finalizer and status (attached, publish_context, errors).
	"ClusterRole/ontap-csi-attacher": {
		"/persistentvolumes:get", "/persistentvolumes:list", "/persistentvolumes:watch", "/persistentvolumes:patch",
		"storage.k8s.io/csinodes:get", "storage.k8s.io/csinodes:list", "storage.k8s.io/csinodes:watch",
		"storage.k8s.io/volumeattachments:get", "storage.k8s.io/volumeattachments:list",
		"storage.k8s.io/volumeattachments:watch", "storage.k8s.io/volumeattachments:patch",
		"storage.k8s.io/volumeattachments/status:patch",
	},
	// csi-resizer: PV capacity, claims and their status, pods using a claim
	// (--handle-volume-inuse-error), events, and the VolumeAttributesClasses
	// of its modify controller, which runs because ontap-csi advertises
	// MODIFY_VOLUME (feature gate VolumeAttributesClass, GA and on by
	// default in v2.1.0 where the cluster serves storage.k8s.io/v1).
	"ClusterRole/ontap-csi-resizer": {
		"/persistentvolumes:get", "/persistentvolumes:list", "/persistentvolumes:watch", "/persistentvolumes:patch",
		"/persistentvolumeclaims:get", "/persistentvolumeclaims:list", "/persistentvolumeclaims:watch",
		"/persistentvolumeclaims/status:patch",
		"/pods:get", "/pods:list", "/pods:watch",
		"/events:create", "/events:patch",
		"storage.k8s.io/volumeattributesclasses:get", "storage.k8s.io/volumeattributesclasses:list",
		"storage.k8s.io/volumeattributesclasses:watch",
	},
	// csi-snapshotter (sidecar): classes, contents (handle, finalizer) and
	// their status, events.
	"ClusterRole/ontap-csi-snapshotter": {
		"/events:create", "/events:patch",
		"snapshot.storage.k8s.io/volumesnapshotclasses:get", "snapshot.storage.k8s.io/volumesnapshotclasses:list",
		"snapshot.storage.k8s.io/volumesnapshotclasses:watch",
		"snapshot.storage.k8s.io/volumesnapshotcontents:get", "snapshot.storage.k8s.io/volumesnapshotcontents:list",
		"snapshot.storage.k8s.io/volumesnapshotcontents:watch", "snapshot.storage.k8s.io/volumesnapshotcontents:update",
		"snapshot.storage.k8s.io/volumesnapshotcontents:patch",
		"snapshot.storage.k8s.io/volumesnapshotcontents/status:update", "snapshot.storage.k8s.io/volumesnapshotcontents/status:patch",
	},
	// Sidecar leader election (replicas > 1).
	"Role/ontap-csi-leader-election": {
		"coordination.k8s.io/leases:get", "coordination.k8s.io/leases:create", "coordination.k8s.io/leases:update",
	},
	// Node plugin: node/kubenode gets its own Node, for its topology labels
	// at start and to see whether the node info annotation is current, and
	// merge-patches the annotation onto it when it is not (get, patch; the
	// ValidatingAdmissionPolicy of TestNodeInfoPolicy narrows the patch to
	// that annotation of the pod's own Node); the
	// registration watchdog's informer on its own CSINode (get, list, watch);
	// node/kubenode's Attachments at start: the node's VolumeAttachments
	// (list) and their PVs' volume handles (get), for node/cleanup.go.
	"ClusterRole/ontap-csi-node": {
		"/nodes:get", "/nodes:patch",
		"storage.k8s.io/csinodes:get", "storage.k8s.io/csinodes:list", "storage.k8s.io/csinodes:watch",
		"storage.k8s.io/volumeattachments:list", "/persistentvolumes:get",
	},
	// ontap-csi's controller with --crd_persistence, in its namespace only
	// (Trident's TridentBackendConfigs, their Secrets and TridentNodes live
	// in the controller's namespace). controller/backendconfigs: list and
	// watch TridentBackendConfigs (its own list/watch loop, no get), update
	// to add and remove Trident's finalizer, update status for the phase and
	// message. Secrets: get only, of the one a TridentBackendConfig names
	// (a user-chosen name, so resourceNames cannot narrow it further; no
	// list/watch, it is re-read every resync). controller/tridentnodes: get
	// on ControllerPublishVolume, create/update on a node's PUT
	// /trident/v1/node, list for GET /trident/v1/node, update+delete for
	// DELETE (the finalizer comes off first); never watched.
	"Role/ontap-csi-controller": {
		"trident.netapp.io/tridentbackendconfigs:list", "trident.netapp.io/tridentbackendconfigs:watch",
		"trident.netapp.io/tridentbackendconfigs:update", "trident.netapp.io/tridentbackendconfigs/status:update",
		"/secrets:get",
		"trident.netapp.io/tridentnodes:get", "trident.netapp.io/tridentnodes:list", "trident.netapp.io/tridentnodes:create",
		"trident.netapp.io/tridentnodes:update", "trident.netapp.io/tridentnodes:delete",
	},
	// controller/kubenodes: ControllerPublishVolume reads the node info
	// annotation of the Node (without --crd_persistence);
	// controller/tridentrest: a registering node is answered with its
	// Node's topology.kubernetes.io labels, as Trident's controller does.
	// The controller: node info from Node annotations (get), and once per
	// --backend_storage_poll_interval the lists behind trident_node_count,
	// trident_storageclass_count and ontap_csi_volume_info
	// (controller/inventory). CreateVolume gets the claim csi-provisioner
	// names (--extra-create-metadata) for its trident.netapp.io
	// annotations, and each volume's PV for the ONTAP name it records
	// (controller/kubevolumes).
	"ClusterRole/ontap-csi-controller": {"/nodes:get", "/nodes:list", "/persistentvolumes:list", "storage.k8s.io/storageclasses:list",
		"/persistentvolumeclaims:get", "/persistentvolumes:get"},
	// csi-provisioner with --enable-capacity (rendered only then,
	// TestStorageCapacity): its informer lists and watches the
	// CSIStorageCapacity objects of its namespace, and pkg/capacity
	// creates, updates and deletes them (no get, no patch); pkg/owner gets
	// its pod and that pod's ReplicaSet to reach the owning Deployment
	// (--capacity-ownerref-level=2: the last step reads the ReplicaSet's
	// owner reference, no get on deployments).
	"Role/ontap-csi-provisioner-capacity": {
		"storage.k8s.io/csistoragecapacities:list", "storage.k8s.io/csistoragecapacities:watch",
		"storage.k8s.io/csistoragecapacities:create", "storage.k8s.io/csistoragecapacities:update",
		"storage.k8s.io/csistoragecapacities:delete",
		"/pods:get", "apps/replicasets:get",
	},
	// Helm's uninstall Job: kubectl rollout status on one DaemonSet.
	"Role/ontap-csi-deregister-wait": {
		"apps/daemonsets:get", "apps/daemonsets:list", "apps/daemonsets:watch",
	},
}

// groupSnapshotterRBAC: csi-snapshotter with its feature gate
// CSIVolumeGroupSnapshot: group snapshot classes, and contents (handle,
// finalizer) and their status.
var groupSnapshotterRBAC = append(slices.Clone(allowedRBAC["ClusterRole/ontap-csi-snapshotter"]),
	"groupsnapshot.storage.k8s.io/volumegroupsnapshotclasses:get", "groupsnapshot.storage.k8s.io/volumegroupsnapshotclasses:list",
	"groupsnapshot.storage.k8s.io/volumegroupsnapshotclasses:watch",
	"groupsnapshot.storage.k8s.io/volumegroupsnapshotcontents:get", "groupsnapshot.storage.k8s.io/volumegroupsnapshotcontents:list",
	"groupsnapshot.storage.k8s.io/volumegroupsnapshotcontents:watch", "groupsnapshot.storage.k8s.io/volumegroupsnapshotcontents:update",
	"groupsnapshot.storage.k8s.io/volumegroupsnapshotcontents:patch",
	"groupsnapshot.storage.k8s.io/volumegroupsnapshotcontents/status:update",
	"groupsnapshot.storage.k8s.io/volumegroupsnapshotcontents/status:patch",
)

// allowedRBACOverrides: the renderings whose roles grant other than
// allowedRBAC: less (trident-node), or more where a feature asks for it.
var allowedRBACOverrides = map[string]map[string][]string{
	"kustomize/group-snapshots": {"ClusterRole/ontap-csi-snapshotter": groupSnapshotterRBAC},
	"helm-group-snapshots":      {"ClusterRole/ontap-csi-snapshotter": groupSnapshotterRBAC},
	// Trident's controller gets the node info over its REST API and never
	// reads a Node annotation: no patch. The node plugin still gets its
	// own Node for the topology labels NodeGetInfo reports, as Trident's
	// node ClusterRole allows (get nodes, nothing more).
	"kustomize/trident-node": {
		"ClusterRole/ontap-csi-node": {
			"/nodes:get",
			"storage.k8s.io/csinodes:get", "storage.k8s.io/csinodes:list", "storage.k8s.io/csinodes:watch",
		},
	},
}

// allowedBindings: which ServiceAccount each role is granted to.
var allowedBindings = map[string]string{
	"ClusterRole/ontap-csi-provisioner":   "ontap-csi-controller",
	"ClusterRole/ontap-csi-attacher":      "ontap-csi-controller",
	"ClusterRole/ontap-csi-resizer":       "ontap-csi-controller",
	"ClusterRole/ontap-csi-snapshotter":   "ontap-csi-controller",
	"Role/ontap-csi-leader-election":      "ontap-csi-controller",
	"ClusterRole/ontap-csi-node":          "ontap-csi-node",
	"Role/ontap-csi-deregister-wait":      "ontap-csi-deregister-wait",
	"Role/ontap-csi-provisioner-capacity": "ontap-csi-controller",
	"Role/ontap-csi-controller":           "ontap-csi-controller",
	"ClusterRole/ontap-csi-controller":    "ontap-csi-controller",
}

func TestRBACIsTheAllowList(t *testing.T) {
	for what, objs := range map[string]objects{
		"kustomize/base":            kustomize(t, "kustomize/base"),
		"kustomize/ha":              kustomize(t, "kustomize/ha"),
		"kustomize/trident-node":    kustomize(t, "kustomize/trident-node"),
		"kustomize/group-snapshots": kustomize(t, "kustomize/group-snapshots"),
		"helm":                      helm(t),
		"helm-ha":                   helm(t, "controller.replicas=2"),
		"helm-group-snapshots":      helm(t, "groupSnapshots=true"),
		"kustomize/capacity":        kustomize(t, "kustomize/capacity"),
		"helm-capacity":             helm(t, "storageCapacity=true"),
	} {
		t.Run(strings.ReplaceAll(what, "/", "-"), func(t *testing.T) {
			roles := map[string][]rbacv1.PolicyRule{}
			for name, r := range all[*rbacv1.ClusterRole](objs) {
				roles["ClusterRole/"+name] = r.Rules
			}
			for name, r := range all[*rbacv1.Role](objs) {
				roles["Role/"+name] = r.Rules
			}
			if len(roles) == 0 {
				t.Fatal("no roles rendered")
			}
			for role, rules := range roles {
				allowed, ok := allowedRBACOverrides[what][role]
				if !ok {
					allowed, ok = allowedRBAC[role]
				}
				if !ok {
					t.Errorf("%s is not in the allow-list", role)
					continue
				}
				if got, want := grants(t, role, rules), sorted(allowed); strings.Join(got, " ") != strings.Join(want, " ") {
					t.Errorf("%s grants\n%s\nallowed\n%s", role, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			}
			checkBindings(t, objs, roles)
		})
	}
}

// grants flattens rules into "group/resource:verb" and refuses wildcards
// and resource names (a name restriction is fine only where listed).
func grants(t *testing.T, role string, rules []rbacv1.PolicyRule) []string {
	t.Helper()
	var out []string
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			t.Errorf("%s: non-resource URLs %v", role, r.NonResourceURLs)
		}
		if len(r.ResourceNames) > 0 && role != "Role/ontap-csi-deregister-wait" {
			t.Errorf("%s: unexpected resourceNames %v", role, r.ResourceNames)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if g == "*" || res == "*" || v == "*" {
						t.Errorf("%s: wildcard in %v", role, r)
					}
					out = append(out, fmt.Sprintf("%s/%s:%s", g, res, v))
				}
			}
		}
	}
	return sorted(out)
}

func checkBindings(t *testing.T, objs objects, roles map[string][]rbacv1.PolicyRule) {
	t.Helper()
	bound := map[string]bool{}
	check := func(binding string, ref rbacv1.RoleRef, subjects []rbacv1.Subject, ns string) {
		role := ref.Kind + "/" + ref.Name
		bound[role] = true
		if _, ok := roles[role]; !ok {
			t.Errorf("%s binds %s, which is not rendered", binding, role)
		}
		want, ok := allowedBindings[role]
		if !ok {
			t.Errorf("%s binds %s, which may not be bound", binding, role)
			return
		}
		if len(subjects) != 1 || subjects[0].Kind != rbacv1.ServiceAccountKind || subjects[0].Name != want ||
			(ns != "" && subjects[0].Namespace != ns) {
			t.Errorf("%s grants %s to %v, want only ServiceAccount %s", binding, role, subjects, want)
		}
		if subjects[0].Namespace == "" {
			t.Errorf("%s: subject without namespace", binding)
		}
	}
	for name, b := range all[*rbacv1.ClusterRoleBinding](objs) {
		check("ClusterRoleBinding/"+name, b.RoleRef, b.Subjects, "")
	}
	for name, b := range all[*rbacv1.RoleBinding](objs) {
		check("RoleBinding/"+name, b.RoleRef, b.Subjects, b.Namespace)
	}
	for role := range roles {
		if !bound[role] {
			t.Errorf("%s is rendered but bound to nobody", role)
		}
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// TestNodeInfoPolicy: wherever the node plugin may patch Nodes, the
// ValidatingAdmissionPolicy that confines the patch to the node-info
// annotation of the pod's own Node is rendered and bound to deny, and it
// names what the code uses: the annotation key (package nodeinfo), the
// token's node claim, the node DaemonSet's service account. Where the node
// plugin gets no Node write (trident-node, Helm's opt-out for clusters
// before 1.30), there is nothing to guard. test/cluster shows the policy
// deny on a real API server (docs/e2e.md).
func TestNodeInfoPolicy(t *testing.T) {
	for what, objs := range map[string]objects{
		"kustomize/base":         kustomize(t, "kustomize/base"),
		"kustomize/ha":           kustomize(t, "kustomize/ha"),
		"kustomize/trident-node": kustomize(t, "kustomize/trident-node"),
		"helm":                   helm(t),
		"helm-no-policy":         helm(t, "node.nodeInfoPolicy=false"),
	} {
		t.Run(strings.ReplaceAll(what, "/", "-"), func(t *testing.T) {
			role := get[*rbacv1.ClusterRole](t, objs, "ontap-csi-node")
			patches := slices.Contains(grants(t, "ClusterRole/ontap-csi-node", role.Rules), "/nodes:patch")
			policies := all[*admissionregistrationv1.ValidatingAdmissionPolicy](objs)
			bindings := all[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](objs)
			switch {
			case what == "helm-no-policy":
				if len(policies)+len(bindings) > 0 || !patches {
					t.Fatalf("node.nodeInfoPolicy=false: %d policies, %d bindings, Node patch %v", len(policies), len(bindings), patches)
				}
				return
			case !patches:
				if len(policies)+len(bindings) > 0 {
					t.Errorf("no Node write, yet %d policies and %d bindings", len(policies), len(bindings))
				}
				return
			}
			p := get[*admissionregistrationv1.ValidatingAdmissionPolicy](t, objs, "ontap-csi-node-info")
			checkNodeInfoPolicy(t, p, serviceAccountOf(t, objs))
			b := get[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, objs, "ontap-csi-node-info")
			if b.Spec.PolicyName != p.Name || !slices.Equal(b.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) ||
				b.Spec.ParamRef != nil || b.Spec.MatchResources != nil {
				t.Errorf("binding %+v, want policy %s, actions [Deny], no params, no narrower match", b.Spec, p.Name)
			}
		})
	}
}

func serviceAccountOf(t *testing.T, objs objects) string {
	t.Helper()
	ds := all[*appsv1.DaemonSet](objs)
	for _, d := range ds {
		if d.Spec.Template.Spec.ServiceAccountName != "" && d.Spec.Template.Spec.Containers[0].Name == "ontap-csi" {
			return d.Spec.Template.Spec.ServiceAccountName
		}
	}
	t.Fatal("no node DaemonSet with a service account")
	return ""
}

func checkNodeInfoPolicy(t *testing.T, p *admissionregistrationv1.ValidatingAdmissionPolicy, sa string) {
	t.Helper()
	s := p.Spec
	if s.FailurePolicy == nil || *s.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("failurePolicy %v, want Fail: a policy that cannot be evaluated must not let the write through", s.FailurePolicy)
	}
	rules := s.MatchConstraints.ResourceRules
	if len(rules) != 1 || !slices.Equal(rules[0].APIGroups, []string{""}) || !slices.Equal(rules[0].Resources, []string{"nodes"}) ||
		!slices.Equal(rules[0].Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Update}) {
		t.Errorf("match rules %+v, want UPDATE of core nodes (what RBAC's patch becomes)", rules)
	}
	if len(s.MatchConditions) != 1 || !strings.Contains(s.MatchConditions[0].Expression, "':"+sa+"')") ||
		!strings.Contains(s.MatchConditions[0].Expression, "'system:serviceaccount:'") {
		t.Errorf("match conditions %+v, want the service account %s", s.MatchConditions, sa)
	}
	var all strings.Builder
	for _, v := range s.Variables {
		all.WriteString(v.Expression + "\n")
	}
	for _, v := range s.Validations {
		all.WriteString(v.Expression + "\n")
	}
	for _, want := range []string{"'" + nodeinfo.AnnotationKey + "'", "'authentication.kubernetes.io/node-name'",
		"object.metadata.name", "object.metadata.labels", "object.spec", "oldObject.metadata.annotations"} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("the policy's expressions never mention %s", want)
		}
	}
}
