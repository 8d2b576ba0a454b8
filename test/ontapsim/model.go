package ontapsim

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"
)

// model is the whole simulated cluster. It is guarded by Simulator.mu and
// saved verbatim to <data-dir>/state.json, so every field is exported to
// encoding/json; jobs are deliberately not part of it (they are transient, as
// on ONTAP after a takeover).
type model struct {
	Format           int                `json:"format"`
	Cluster          clusterState       `json:"cluster"`
	Nodes            []*nodeState       `json:"nodes"`
	Aggregates       []*aggrState       `json:"aggregates"`
	SVMs             []*svmState        `json:"svms"`
	LIFs             []*lifState        `json:"lifs"`
	SnapshotPolicies []*snapPolicyState `json:"snapshot_policies"`
	QoSPolicies      []*qosPolicyState  `json:"qos_policies,omitempty"`
	// ConsistencyGroups by uuid (cgs.go).
	ConsistencyGroups map[string]*cgState     `json:"consistency_groups,omitempty"`
	Volumes           map[string]*volumeState `json:"volumes"`
	RecoveryQueue     []*volumeState          `json:"recovery_queue"`
	ExportPolicies    map[int64]*policyState  `json:"export_policies"`
	LUNs              map[string]*lunState    `json:"luns"`
	IGroups           map[string]*igroupState `json:"igroups"`
	LUNMaps           []*lunMapState          `json:"lun_maps"`
	Credentials       []*chapState            `json:"credentials"`
	DeletedSeq        int                     `json:"deleted_seq"`

	// Qtrees and tree quotas (qtrees.go, quotas.go).
	Qtrees       map[string]*qtreeState       `json:"qtrees,omitempty"` // "<volume uuid>/<id>"
	QuotaRules   map[string]*quotaRuleState   `json:"quota_rules,omitempty"`
	VolumeQuotas map[string]*volumeQuotaState `json:"volume_quotas,omitempty"` // by volume uuid
}

const modelFormat = 1

type clusterState struct {
	Name    string `json:"name"`
	UUID    string `json:"uuid"`
	Version string `json:"version"` // "9.15.1"
}

type nodeState struct {
	UUID    string `json:"uuid"`
	Name    string `json:"name"`
	Serial  string `json:"serial"`
	Partner string `json:"partner"` // HA partner node UUID
}

type aggrState struct {
	UUID     string `json:"uuid"`
	Name     string `json:"name"`
	Node     string `json:"node"` // node UUID
	Size     int64  `json:"size"`
	DiskType string `json:"disk_type"`
}

type svmState struct {
	UUID       string   `json:"uuid"`
	Name       string   `json:"name"`
	Index      int      `json:"index"` // vserver id: IQN suffix and export policy id high bits
	Aggregates []string `json:"aggregates"`
	TargetIQN  string   `json:"target_iqn"`
	ISCSI      bool     `json:"iscsi_enabled"`
	NFS        bool     `json:"nfs_enabled"`
	PolicySeq  int64    `json:"policy_seq"` // last export policy n; ids are Index<<32 + n
}

type lifState struct {
	UUID     string   `json:"uuid"`
	Name     string   `json:"name"`
	SVM      string   `json:"svm"`
	Node     string   `json:"node"`
	IP       string   `json:"ip"`
	Netmask  string   `json:"netmask"`
	Services []string `json:"services"`
	Up       bool     `json:"up"`
}

type snapPolicyState struct {
	UUID string `json:"uuid"`
	Name string `json:"name"`
}

type volumeState struct {
	UUID            string           `json:"uuid"`
	Name            string           `json:"name"`
	SVM             string           `json:"svm"`
	Aggregate       string           `json:"aggregate"`
	Size            int64            `json:"size"`
	State           string           `json:"state"`
	Type            string           `json:"type"`
	Comment         string           `json:"comment,omitempty"`
	CreateTime      time.Time        `json:"create_time"`
	Guarantee       string           `json:"guarantee"`
	SnapshotPolicy  string           `json:"snapshot_policy"`
	SnapdirAccess   bool             `json:"snapdir_access"`
	JunctionPath    string           `json:"junction_path,omitempty"`
	SecurityStyle   string           `json:"security_style"`
	UnixPermissions int              `json:"unix_permissions"` // octal digits written as decimal (755)
	UID             int              `json:"uid"`
	GID             int              `json:"gid"`
	ExportPolicy    int64            `json:"export_policy"`
	ReservePercent  int              `json:"reserve_percent"`
	Language        string           `json:"language"`
	TieringPolicy   string           `json:"tiering_policy"`
	Encryption      bool             `json:"encryption"`
	QoSPolicy       string           `json:"qos_policy,omitempty"`
	AutosizeMode    string           `json:"autosize_mode"`
	LargeSize       bool             `json:"large_size,omitempty"` // space.large_size_enabled
	IsSVMRoot       bool             `json:"is_svm_root,omitempty"`
	CloneParent     string           `json:"clone_parent,omitempty"`      // parent volume UUID while a FlexClone
	CloneParentSnap string           `json:"clone_parent_snap,omitempty"` // parent snapshot UUID
	SplitInitiated  bool             `json:"split_initiated,omitempty"`
	Snapshots       []*snapshotState `json:"snapshots,omitempty"`
	DeletedAt       time.Time        `json:"deleted_at,omitzero"`
}

type snapshotState struct {
	UUID            string    `json:"uuid"`
	Name            string    `json:"name"`
	CreateTime      time.Time `json:"create_time"`
	Comment         string    `json:"comment,omitempty"`
	ExpiryTime      string    `json:"expiry_time,omitempty"`
	SnapmirrorLabel string    `json:"snapmirror_label,omitempty"`
	// LUNs is the manifest of the volume's LUNs when the snapshot was taken;
	// their data lives in <data-dir>/snapshots/<uuid>/luns/<lun-uuid>.img.
	LUNs []snapLUN `json:"luns,omitempty"`
}

type snapLUN struct {
	UUID       string    `json:"uuid"`
	Leaf       string    `json:"leaf"`
	Size       int64     `json:"size"`
	OSType     string    `json:"os_type"`
	Reserved   bool      `json:"reserved"`
	Comment    string    `json:"comment,omitempty"`
	Attributes []lunAttr `json:"attributes,omitempty"`
}

type policyState struct {
	ID        int64        `json:"id"`
	Name      string       `json:"name"`
	SVM       string       `json:"svm"`
	Rules     []*ruleState `json:"rules"`
	IsDefault bool         `json:"is_default,omitempty"`
}

type ruleState struct {
	Index               int64    `json:"index"`
	Clients             []string `json:"clients"`
	Protocols           []string `json:"protocols"`
	RORule              []string `json:"ro_rule"`
	RWRule              []string `json:"rw_rule"`
	Superuser           []string `json:"superuser"`
	AnonymousUser       string   `json:"anonymous_user"`
	AllowSUID           bool     `json:"allow_suid"`
	AllowDeviceCreation bool     `json:"allow_device_creation"`
	ChownMode           string   `json:"chown_mode"`
	NTFSUnixSecurity    string   `json:"ntfs_unix_security"`
}

type lunState struct {
	UUID       string    `json:"uuid"`
	Volume     string    `json:"volume"` // volume UUID
	Leaf       string    `json:"leaf"`   // "lun0" in /vol/<volume>/lun0
	SVM        string    `json:"svm"`
	Size       int64     `json:"size"`
	OSType     string    `json:"os_type"`
	Serial     string    `json:"serial"`
	Reserved   bool      `json:"reserved"` // space.guarantee.requested
	Comment    string    `json:"comment,omitempty"`
	QoSPolicy  string    `json:"qos_policy,omitempty"`
	Enabled    bool      `json:"enabled"`
	CreateTime time.Time `json:"create_time"`
	Attributes []lunAttr `json:"attributes,omitempty"`
}

type lunAttr struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type igroupState struct {
	UUID          string      `json:"uuid"`
	Name          string      `json:"name"`
	SVM           string      `json:"svm"`
	Protocol      string      `json:"protocol"`
	OSType        string      `json:"os_type"`
	Comment       string      `json:"comment,omitempty"`
	DeleteOnUnmap bool        `json:"delete_on_unmap,omitempty"`
	Initiators    []initiator `json:"initiators,omitempty"`
}

type initiator struct {
	Name    string `json:"name"`
	Comment string `json:"comment,omitempty"`
}

type lunMapState struct {
	LUN            string   `json:"lun"`
	IGroup         string   `json:"igroup"`
	ID             int      `json:"id"`
	ReportingNodes []string `json:"reporting_nodes"` // node UUIDs
}

type chapState struct {
	SVM          string `json:"svm"`
	Initiator    string `json:"initiator"` // "default" or an IQN
	AuthType     string `json:"authentication_type"`
	InboundUser  string `json:"inbound_user,omitempty"`
	InboundPass  string `json:"inbound_password,omitempty"`
	OutboundUser string `json:"outbound_user,omitempty"`
	OutboundPass string `json:"outbound_password,omitempty"`
}

// newUUID returns an RFC 4122 version-4 UUID string.
func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// Lookups. All of them run with Simulator.mu held. The model is small (a
// test creates hundreds of objects at most), so linear scans keep it simple.

func (m *model) node(uuid string) *nodeState {
	for _, n := range m.Nodes {
		if n.UUID == uuid {
			return n
		}
	}
	return nil
}

func (m *model) nodeByName(name string) *nodeState {
	for _, n := range m.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func (m *model) aggr(uuid string) *aggrState {
	for _, a := range m.Aggregates {
		if a.UUID == uuid {
			return a
		}
	}
	return nil
}

func (m *model) aggrByName(name string) *aggrState {
	for _, a := range m.Aggregates {
		if a.Name == name {
			return a
		}
	}
	return nil
}

func (m *model) svm(uuid string) *svmState {
	for _, s := range m.SVMs {
		if s.UUID == uuid {
			return s
		}
	}
	return nil
}

func (m *model) svmByName(name string) *svmState {
	for _, s := range m.SVMs {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func (m *model) volumeByName(svm, name string) *volumeState {
	for _, v := range m.Volumes {
		if v.SVM == svm && v.Name == name {
			return v
		}
	}
	return nil
}

func (m *model) snapPolicyByName(name string) *snapPolicyState {
	for _, p := range m.SnapshotPolicies {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func (m *model) policyByName(svm, name string) *policyState {
	for _, p := range m.ExportPolicies {
		if p.SVM == svm && p.Name == name {
			return p
		}
	}
	return nil
}

func (m *model) lunByPath(svm, path string) *lunState {
	for _, l := range m.LUNs {
		if l.SVM == svm && m.lunPath(l) == path {
			return l
		}
	}
	return nil
}

func (m *model) lunPath(l *lunState) string {
	v := m.Volumes[l.Volume]
	if v == nil {
		return ""
	}
	return "/vol/" + v.Name + "/" + l.Leaf
}

func (m *model) lunsOfVolume(vol string) []*lunState {
	var out []*lunState
	for _, l := range m.LUNs {
		if l.Volume == vol {
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Leaf < out[j].Leaf })
	return out
}

func (m *model) igroupByName(svm, name string) *igroupState {
	for _, g := range m.IGroups {
		if g.SVM == svm && g.Name == name {
			return g
		}
	}
	return nil
}

func (m *model) lunMap(lun, igroup string) *lunMapState {
	for _, lm := range m.LUNMaps {
		if lm.LUN == lun && lm.IGroup == igroup {
			return lm
		}
	}
	return nil
}

func (m *model) mapsOfLUN(lun string) []*lunMapState {
	var out []*lunMapState
	for _, lm := range m.LUNMaps {
		if lm.LUN == lun {
			out = append(out, lm)
		}
	}
	return out
}

func (m *model) mapsOfIGroup(ig string) []*lunMapState {
	var out []*lunMapState
	for _, lm := range m.LUNMaps {
		if lm.IGroup == ig {
			out = append(out, lm)
		}
	}
	return out
}

func (m *model) removeMaps(keep func(*lunMapState) bool) {
	out := m.LUNMaps[:0]
	for _, lm := range m.LUNMaps {
		if keep(lm) {
			out = append(out, lm)
		}
	}
	m.LUNMaps = out
}

func (m *model) credential(svm, init string) *chapState {
	for _, c := range m.Credentials {
		if c.SVM == svm && c.Initiator == init {
			return c
		}
	}
	return nil
}

// clonesOf lists the FlexClones whose parent is vol (and, if snap is not
// empty, whose parent snapshot is snap).
func (m *model) clonesOf(vol, snap string) []*volumeState {
	var out []*volumeState
	for _, v := range m.Volumes {
		if v.CloneParent == vol && (snap == "" || v.CloneParentSnap == snap) {
			out = append(out, v)
		}
	}
	return out
}

// volumeAtJunction returns the mounted volume whose junction path is p,
// compared case-insensitively as ONTAP does (docs/design/ontap-rest.md §4.4).
func (m *model) volumeAtJunction(svm, p string) *volumeState {
	for _, v := range m.Volumes {
		if v.SVM == svm && v.JunctionPath != "" && strings.EqualFold(v.JunctionPath, p) {
			return v
		}
	}
	return nil
}

func (s *snapshotState) lun(uuid string) *snapLUN {
	for i := range s.LUNs {
		if s.LUNs[i].UUID == uuid {
			return &s.LUNs[i]
		}
	}
	return nil
}

func (v *volumeState) snapshot(uuid string) *snapshotState {
	for _, sn := range v.Snapshots {
		if sn.UUID == uuid {
			return sn
		}
	}
	return nil
}

func (v *volumeState) snapshotByName(name string) *snapshotState {
	for _, sn := range v.Snapshots {
		if sn.Name == name {
			return sn
		}
	}
	return nil
}
