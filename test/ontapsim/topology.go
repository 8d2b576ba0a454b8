package ontapsim

import (
	"fmt"
	"net"
	"strings"
	"time"
)

const (
	svmIndex        = 2 // vserver id of the data SVM: ":vs.2" in the IQN, (2<<32)+n export policy ids
	rootVolumeSize  = 1 << 30
	defaultPolicyID = int64(svmIndex)<<32 + 1
)

var (
	nfsServices   = []string{"data_core", "data_nfs", "data_cifs", "data_flexcache"}
	iscsiServices = []string{"data_core", "data_iscsi"}
)

// newTopology builds a fresh cluster with the per-SVM default objects of
// docs/design/ontap-rest.md §4.6: SVM running with all aggregates, root volume mounted
// at "/", export policy "default" with an allow-all rule, iSCSI service
// with a target IQN, CHAP credential "default" (none), data LIFs up,
// snapshot policies "default" and "none", and the cluster's adaptive QoS
// policy groups (docs/design/ontap-rest.md §3.12).
func newTopology(cfg *Config) *model {
	m := &model{
		Format:         modelFormat,
		Cluster:        clusterState{Name: cfg.ClusterName, UUID: newUUID(), Version: cfg.ONTAPVersion},
		Volumes:        map[string]*volumeState{},
		ExportPolicies: map[int64]*policyState{},
		LUNs:           map[string]*lunState{},
		IGroups:        map[string]*igroupState{},
		Qtrees:         map[string]*qtreeState{},
		QuotaRules:     map[string]*quotaRuleState{},
		VolumeQuotas:   map[string]*volumeQuotaState{},
	}
	for i := 0; i < cfg.Nodes; i++ {
		m.Nodes = append(m.Nodes, &nodeState{
			UUID:   newUUID(),
			Name:   fmt.Sprintf("%s-%02d", cfg.ClusterName, i+1),
			Serial: fmt.Sprintf("4%011d", 10000+i),
		})
	}
	for i := 0; i+1 < len(m.Nodes); i += 2 {
		m.Nodes[i].Partner, m.Nodes[i+1].Partner = m.Nodes[i+1].UUID, m.Nodes[i].UUID
	}
	for _, a := range cfg.Aggregates {
		m.Aggregates = append(m.Aggregates, &aggrState{UUID: newUUID(), Name: a.Name, Node: m.Nodes[a.Node].UUID, Size: a.Size, DiskType: a.DiskType})
	}
	svm := &svmState{UUID: newUUID(), Name: cfg.SVM, Index: svmIndex, ISCSI: true, NFS: true, PolicySeq: 1}
	svm.TargetIQN = fmt.Sprintf("iqn.1992-08.com.netapp:sn.%s:vs.%d", strings.ReplaceAll(svm.UUID, "-", ""), svm.Index)
	for _, a := range m.Aggregates {
		svm.Aggregates = append(svm.Aggregates, a.UUID)
	}
	m.SVMs = []*svmState{svm}

	addLIF := func(kind string, i int, ip string, services []string) {
		mask := "24"
		if net.ParseIP(ip).To4() == nil {
			mask = "64"
		}
		m.LIFs = append(m.LIFs, &lifState{
			UUID: newUUID(), Name: fmt.Sprintf("%s_%s_lif%d", cfg.SVM, kind, i+1), SVM: svm.UUID,
			Node: m.Nodes[i%len(m.Nodes)].UUID, IP: ip, Netmask: mask,
			Services: append([]string(nil), services...), Up: true,
		})
	}
	for i, ip := range cfg.NFSLIFs {
		addLIF("nfs", i, ip, nfsServices)
	}
	for i, ip := range cfg.ISCSILIFs {
		addLIF("iscsi", i, ip, iscsiServices)
	}

	m.SnapshotPolicies = []*snapPolicyState{{UUID: newUUID(), Name: "default"}, {UUID: newUUID(), Name: "none"}}
	m.QoSPolicies = builtinQoSPolicies()
	m.ExportPolicies[defaultPolicyID] = &policyState{
		ID: defaultPolicyID, Name: "default", SVM: svm.UUID, IsDefault: true,
		Rules: []*ruleState{newRule(1, []string{"0.0.0.0/0"})},
	}
	root := &volumeState{
		UUID: newUUID(), Name: cfg.SVM + "_root", SVM: svm.UUID, Aggregate: m.Aggregates[0].UUID,
		Size: rootVolumeSize, State: "online", Type: "rw", CreateTime: time.Now(), Guarantee: "volume",
		SnapshotPolicy: "default", SnapdirAccess: true, JunctionPath: "/", SecurityStyle: "unix",
		UnixPermissions: 755, ExportPolicy: defaultPolicyID, ReservePercent: 5, Language: "c.utf_8",
		TieringPolicy: "none", AutosizeMode: "off", IsSVMRoot: true,
	}
	m.Volumes[root.UUID] = root
	m.Credentials = []*chapState{{SVM: svm.UUID, Initiator: "default", AuthType: "none"}}
	return m
}

// newRule is an export rule with ONTAP's defaults for omitted fields.
func newRule(index int64, clients []string) *ruleState {
	return &ruleState{
		Index: index, Clients: clients,
		Protocols: []string{"any"}, RORule: []string{"any"}, RWRule: []string{"any"}, Superuser: []string{"any"},
		AnonymousUser: "65534", AllowSUID: true, AllowDeviceCreation: true,
		ChownMode: "restricted", NTFSUnixSecurity: "fail",
	}
}

// dataSVM returns the one data SVM.
func (m *model) dataSVM() *svmState { return m.SVMs[0] }

// lunNode is the node owning the LUN's volume (its aggregate's node).
func (m *model) lunNode(l *lunState) *nodeState {
	v := m.Volumes[l.Volume]
	if v == nil {
		return nil
	}
	if a := m.aggr(v.Aggregate); a != nil {
		return m.node(a.Node)
	}
	return nil
}

// lifByIP finds an up data LIF of svm at ip offering service.
func (m *model) lifByIP(svm, ip, service string) *lifState {
	want := net.ParseIP(ip)
	if want == nil {
		return nil
	}
	for _, l := range m.LIFs {
		if l.SVM != svm || !l.Up || !net.ParseIP(l.IP).Equal(want) {
			continue
		}
		for _, sv := range l.Services {
			if sv == service {
				return l
			}
		}
	}
	return nil
}

func (m *model) lifsOf(svm, service string) []*lifState {
	var out []*lifState
	for _, l := range m.LIFs {
		if l.SVM != svm || !l.Up {
			continue
		}
		for _, sv := range l.Services {
			if sv == service {
				out = append(out, l)
				break
			}
		}
	}
	return out
}
