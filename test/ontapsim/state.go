package ontapsim

import (
	"fmt"
	"net"
	"sort"
	"time"
)

// Read-only views of the simulated cluster for tests ("nothing leaked")
// and tools. Each call takes a consistent snapshot under the state lock.

// Info describes the simulated SVM.
type Info struct {
	URL          string   `json:"url"`
	Cluster      string   `json:"cluster"`
	ONTAPVersion string   `json:"ontapVersion"`
	SVM          string   `json:"svm"`
	SVMUUID      string   `json:"svmUUID"`
	TargetIQN    string   `json:"targetIQN"`
	NFSLIFs      []string `json:"nfsLIFs"`
	ISCSILIFs    []string `json:"iscsiLIFs"`
	Nodes        []string `json:"nodes"`
	Aggregates   []string `json:"aggregates"`
	DataDir      string   `json:"dataDir"`
}

// Info returns the SVM, its LIF addresses, target IQN, nodes, aggregates.
func (s *Simulator) Info() Info {
	url := s.URL()
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.m
	svm := m.dataSVM()
	info := Info{
		URL: url, Cluster: m.Cluster.Name, ONTAPVersion: m.Cluster.Version, SVM: svm.Name, SVMUUID: svm.UUID,
		TargetIQN: svm.TargetIQN, DataDir: s.dataDir,
	}
	for _, l := range m.lifsOf(svm.UUID, "data_nfs") {
		info.NFSLIFs = append(info.NFSLIFs, l.IP)
	}
	for _, l := range m.lifsOf(svm.UUID, "data_iscsi") {
		info.ISCSILIFs = append(info.ISCSILIFs, l.IP)
	}
	for _, n := range m.Nodes {
		info.Nodes = append(info.Nodes, n.Name)
	}
	for _, a := range m.Aggregates {
		info.Aggregates = append(info.Aggregates, a.Name)
	}
	return info
}

// Stats returns the request counters and injected latency.
func (s *Simulator) Stats() Stats { return s.stats.snapshot() }

// ResetStats zeroes the counters (e.g. between benchmark phases).
func (s *Simulator) ResetStats() { s.stats.reset() }

// SetLIFUp brings a data LIF (by address) up or down.
func (s *Simulator) SetLIFUp(ip string, up bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := net.ParseIP(ip)
	for _, l := range s.m.LIFs {
		if want != nil && net.ParseIP(l.IP).Equal(want) {
			l.Up = up
			return s.saveLocked()
		}
	}
	return fmt.Errorf("no LIF with address %s", ip)
}

// VolumeInfo is a volume as tests see it.
type VolumeInfo struct {
	UUID            string
	Name            string
	Aggregate       string
	Size            int64
	State           string
	Guarantee       string // "volume" (thick) or "none" (thin)
	JunctionPath    string
	ExportPolicy    string
	Comment         string
	SnapshotPolicy  string
	ReservePercent  int
	SnapdirAccess   bool
	UnixPermissions int
	TieringPolicy   string
	QoSPolicy       string // "" when in no policy group
	IsSVMRoot       bool
	LargeSize       bool   // space.large_size_enabled
	CloneParent     string // parent volume name while a FlexClone
	Snapshots       []string
	Directory       string // backing directory
}

func (s *Simulator) volumeInfo(v *volumeState) VolumeInfo {
	m := s.m
	vi := VolumeInfo{
		UUID: v.UUID, Name: v.Name, Size: v.Size, State: v.State, Guarantee: v.Guarantee,
		JunctionPath: v.JunctionPath, Comment: v.Comment, SnapshotPolicy: v.SnapshotPolicy,
		ReservePercent: v.ReservePercent, SnapdirAccess: v.SnapdirAccess, UnixPermissions: v.UnixPermissions,
		TieringPolicy: v.TieringPolicy, QoSPolicy: v.QoSPolicy,
		IsSVMRoot: v.IsSVMRoot, LargeSize: v.LargeSize, Directory: s.volumeDir(v.UUID),
	}
	if a := m.aggr(v.Aggregate); a != nil {
		vi.Aggregate = a.Name
	}
	if p := m.ExportPolicies[v.ExportPolicy]; p != nil {
		vi.ExportPolicy = p.Name
	}
	if p := m.Volumes[v.CloneParent]; p != nil {
		vi.CloneParent = p.Name
	}
	for _, sn := range v.Snapshots {
		vi.Snapshots = append(vi.Snapshots, sn.Name)
	}
	return vi
}

// Volumes lists the visible volumes (the SVM root included, IsSVMRoot set),
// sorted by name.
func (s *Simulator) Volumes() []VolumeInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []VolumeInfo
	for _, v := range s.m.Volumes {
		out = append(out, s.volumeInfo(v))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Volume returns the visible volume with that name.
func (s *Simulator) Volume(name string) (VolumeInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.m.volumeByName(s.m.dataSVM().UUID, name)
	if v == nil {
		return VolumeInfo{}, false
	}
	return s.volumeInfo(v), true
}

// RecoveryQueue lists volumes deleted without force (renamed "<name>_<n>").
func (s *Simulator) RecoveryQueue() []VolumeInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []VolumeInfo
	for _, v := range s.m.RecoveryQueue {
		out = append(out, s.volumeInfo(v))
	}
	return out
}

// SnapshotInfo is a snapshot as tests see it.
type SnapshotInfo struct {
	UUID       string
	Name       string
	Volume     string
	CreateTime time.Time
	Clones     []string // FlexClones depending on it
}

// Snapshots lists the snapshots of a volume, oldest first.
func (s *Simulator) Snapshots(volume string) []SnapshotInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.m.volumeByName(s.m.dataSVM().UUID, volume)
	if v == nil {
		return nil
	}
	var out []SnapshotInfo
	for _, sn := range v.Snapshots {
		si := SnapshotInfo{UUID: sn.UUID, Name: sn.Name, Volume: v.Name, CreateTime: sn.CreateTime}
		for _, c := range s.m.clonesOf(v.UUID, sn.UUID) {
			si.Clones = append(si.Clones, c.Name)
		}
		out = append(out, si)
	}
	return out
}

// LUNInfo is a LUN as tests see it.
type LUNInfo struct {
	UUID       string
	Path       string // /vol/<volume>/<lun>
	Volume     string
	Size       int64
	OSType     string
	Serial     string
	Reserved   bool
	Comment    string
	QoSPolicy  string // "" when in no policy group
	Attributes map[string]string
	Mapped     bool
	File       string // backing sparse file
}

// LUNs lists all LUNs, sorted by path.
func (s *Simulator) LUNs() []LUNInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []LUNInfo
	for _, l := range s.m.LUNs {
		li := LUNInfo{
			UUID: l.UUID, Path: s.m.lunPath(l), Size: l.Size, OSType: l.OSType, Serial: l.Serial,
			Reserved: l.Reserved, Comment: l.Comment, QoSPolicy: l.QoSPolicy, Mapped: len(s.m.mapsOfLUN(l.UUID)) > 0,
			File: s.lunFile(l.UUID), Attributes: map[string]string{},
		}
		if v := s.m.Volumes[l.Volume]; v != nil {
			li.Volume = v.Name
		}
		for _, a := range l.Attributes {
			li.Attributes[a.Name] = a.Value
		}
		out = append(out, li)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// IGroupInfo is an initiator group as tests see it.
type IGroupInfo struct {
	UUID       string
	Name       string
	Protocol   string
	OSType     string
	Initiators []string
}

// IGroups lists the initiator groups, sorted by name.
func (s *Simulator) IGroups() []IGroupInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []IGroupInfo
	for _, g := range s.m.IGroups {
		gi := IGroupInfo{UUID: g.UUID, Name: g.Name, Protocol: g.Protocol, OSType: g.OSType}
		for _, i := range g.Initiators {
			gi.Initiators = append(gi.Initiators, i.Name)
		}
		out = append(out, gi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LUNMapInfo is a LUN map as tests see it.
type LUNMapInfo struct {
	LUNPath        string
	IGroup         string
	LUNID          int
	ReportingNodes []string
}

// LUNMaps lists the LUN maps, sorted by igroup then LUN ID.
func (s *Simulator) LUNMaps() []LUNMapInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []LUNMapInfo
	for _, lm := range s.m.LUNMaps {
		mi := LUNMapInfo{LUNPath: s.m.lunPath(s.m.LUNs[lm.LUN]), IGroup: s.m.IGroups[lm.IGroup].Name, LUNID: lm.ID}
		for _, n := range lm.ReportingNodes {
			if node := s.m.node(n); node != nil {
				mi.ReportingNodes = append(mi.ReportingNodes, node.Name)
			}
		}
		out = append(out, mi)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].IGroup != out[j].IGroup {
			return out[i].IGroup < out[j].IGroup
		}
		return out[i].LUNID < out[j].LUNID
	})
	return out
}

// ExportRule is an export-policy rule (fixtures and views).
type ExportRule struct {
	Index     int64
	Clients   []string // clientmatch strings
	Protocols []string // default ["any"]
	RORule    []string // default ["any"]
	RWRule    []string // default ["any"]
	Superuser []string // default ["any"]
}

// ExportPolicyInfo is an export policy as tests see it.
type ExportPolicyInfo struct {
	ID    int64
	Name  string
	Rules []ExportRule
}

// ExportPolicies lists the export policies, sorted by id ("default" first).
func (s *Simulator) ExportPolicies() []ExportPolicyInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ExportPolicyInfo
	for _, p := range s.m.ExportPolicies {
		pi := ExportPolicyInfo{ID: p.ID, Name: p.Name}
		for _, r := range sortedRules(p) {
			pi.Rules = append(pi.Rules, ExportRule{
				Index: r.Index, Clients: append([]string(nil), r.Clients...), Protocols: append([]string(nil), r.Protocols...),
				RORule: append([]string(nil), r.RORule...), RWRule: append([]string(nil), r.RWRule...),
				Superuser: append([]string(nil), r.Superuser...),
			})
		}
		out = append(out, pi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// JobInfo is a job as tests see it.
type JobInfo struct {
	UUID        string
	Description string
	State       string
	Message     string
	Code        int
}

// Jobs lists the retained jobs, oldest first.
func (s *Simulator) Jobs() []JobInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	var js []*job
	for _, j := range s.jobs {
		js = append(js, j)
	}
	sort.Slice(js, func(i, k int) bool { return js[i].Start.Before(js[k].Start) })
	out := make([]JobInfo, 0, len(js))
	for _, j := range js {
		out = append(out, JobInfo{UUID: j.UUID, Description: j.Description, State: j.State, Message: j.Message, Code: j.Code})
	}
	return out
}
