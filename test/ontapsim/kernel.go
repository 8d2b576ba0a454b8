package ontapsim

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sirupsen/logrus"
)

// The kernel data plane (Config.DataPlane "kernel", `ontap-sim --dataplane
// kernel`) makes the simulated SVM's SAN and NAS objects real in the
// kernel the simulator runs on, so that a real initiator, multipathd and
// NFS client reach them (test/vm runs it in a VM; docs/vm.md):
//
//   - a LUN mapped to an iSCSI igroup is a LIO fileio backstore over the
//     LUN's file, with the LUN's serial as VPD unit serial and NETAPP's
//     vendor and product strings, exported on the SVM's target IQN through
//     one target portal group per iSCSI data LIF (ONTAP gives each LIF its
//     own TPG too), to an ACL per igroup initiator at the map's LUN ID;
//     CHAP comes from the SVM's iSCSI credentials;
//   - a mounted, online volume's export policy rules are nfsd exports of
//     its directory, bind-mounted at its junction path below NFSRoot,
//     which nfs.conf names as [exports] rootdir.
//
// Every committed change reconciles the kernel with the model at once
// (saveLocked calls sync), while the simulator's lock is held: an unmap,
// delete, resize or offline has taken effect when the REST call returns.
// The configfs objects are found again by name after a restart (the HBA
// fileio_<kernelHBA>, backstores named by LUN UUID, targets with NetApp's
// IQN prefix), and Close removes all of them and every export.
//
// Not modelled: an initiator in no igroup cannot log in (ONTAP lets it
// log in to see no LUN); export rules naming hosts, netgroups or domains
// are skipped (the simulator has no name service); protocol-specific rules
// (nfs3 or nfs4 only) export to both; mountd prefers a host match to a
// subnet match where ONTAP takes the first rule by index; volumes crossed
// on the way to a junction are not checked.

const (
	// DataPlaneFile serves the /sim endpoints the test shims use.
	DataPlaneFile = "file"
	// DataPlaneKernel configures LIO and nfsd (see above).
	DataPlaneKernel = "kernel"

	defaultConfigfsRoot = "/sys/kernel/config/target"
	defaultNFSRoot      = "/srv/ontap-sim/nfs"
	// kernelHBA is the index of the fileio HBA holding the simulator's
	// backstores: everything below core/fileio_<kernelHBA> is ours.
	kernelHBA = 1992
	// netappIQNPrefix starts every SVM target IQN; iSCSI targets with it
	// are ours.
	netappIQNPrefix = "iqn.1992-08.com.netapp:"
)

// kernelPlane is the kernel data plane of one simulator; its methods run
// with Simulator.mu held.
type kernelPlane struct {
	configfs string // .../target
	nfsRoot  string
	exportfs string
	// exports are the nfsd exports made, "client:/junction" -> options;
	// binds the junctions bind-mounted, "/junction" -> volume directory.
	exports map[string]string
	binds   map[string]string
}

func newKernelPlane(cfg *Config) (*kernelPlane, error) {
	k := &kernelPlane{configfs: cfg.ConfigfsRoot, nfsRoot: cfg.NFSRoot, exportfs: "exportfs",
		exports: map[string]string{}, binds: map[string]string{}}
	if fi, err := os.Stat(filepath.Join(k.configfs, "core")); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("kernel data plane: %s/core is missing: mount configfs and load target_core_mod, target_core_file and iscsi_target_mod", k.configfs)
	}
	if err := os.MkdirAll(filepath.Join(k.configfs, "iscsi"), 0o755); err != nil {
		return nil, fmt.Errorf("kernel data plane: %v (is iscsi_target_mod loaded?)", err)
	}
	if _, err := exec.LookPath(k.exportfs); err != nil {
		return nil, errors.New("kernel data plane: exportfs is missing (nfs-kernel-server)")
	}
	if out, err := exec.Command("nfsconf", "--get", "exports", "rootdir").Output(); err != nil || filepath.Clean(strings.TrimSpace(string(out))) != filepath.Clean(k.nfsRoot) {
		return nil, fmt.Errorf("kernel data plane: nfs.conf must set [exports] rootdir=%s (nfsconf says %q): NFS clients mount junction paths", k.nfsRoot, strings.TrimSpace(string(out)))
	}
	if err := os.MkdirAll(k.nfsRoot, 0o755); err != nil {
		return nil, err
	}
	if err := k.adoptNFS(); err != nil {
		return nil, err
	}
	return k, nil
}

// syncKernelLocked makes the kernel match the model. Errors are logged:
// the REST operation that led here has succeeded on "ONTAP".
func (s *Simulator) syncKernelLocked() {
	if s.kernel == nil {
		return
	}
	if err := s.kernel.apply(s.desiredKernel()); err != nil {
		logrus.WithError(err).Error("ONTAP simulator: kernel data plane")
	}
}

// closeKernelLocked removes every configfs object and export the
// simulator made.
func (s *Simulator) closeKernelLocked() error {
	if s.kernel == nil {
		return nil
	}
	err := s.kernel.apply(kernelState{backstores: map[string]lioBackstore{}, targets: map[string]*lioTarget{}})
	s.kernel = nil
	return err
}

// kernelState is what the kernel should hold.
type kernelState struct {
	backstores map[string]lioBackstore // by name (LUN UUID)
	targets    map[string]*lioTarget   // by IQN
	exports    map[string]string       // "client:/junction" -> exportfs options
	binds      map[string]string       // "/junction" -> volume directory
}

type lioBackstore struct {
	File   string
	Size   int64
	Serial string
}

type lioTarget struct {
	TPGs map[int]*lioTPG // by tag
}

type lioTPG struct {
	Portal string          // "ip:3260"
	LUNs   map[string]bool // backstores exported through this TPG
	ACLs   map[string]*lioACL
}

// lioACL is one initiator's access: CHAP (nil: none) and its LUNs by the
// LUN ID the igroup map gives them.
type lioACL struct {
	CHAP *chapState
	LUNs map[int]string // LUN ID -> backstore
}

// desiredKernel derives the kernel's objects from the model.
func (s *Simulator) desiredKernel() kernelState {
	st := kernelState{backstores: map[string]lioBackstore{}, targets: map[string]*lioTarget{},
		exports: map[string]string{}, binds: map[string]string{}}
	for _, svm := range s.m.SVMs {
		if svm.ISCSI {
			s.desiredTarget(svm, &st)
		}
		if svm.NFS {
			s.desiredExports(svm, &st)
		}
	}
	return st
}

// desiredTarget adds the SVM's target: a TPG per iSCSI LIF that is up, an
// ACL per initiator of its iSCSI igroups (unless CHAP denies it), and each
// mapped LUN of an online volume on the TPGs of its map's reporting nodes.
func (s *Simulator) desiredTarget(svm *svmState, st *kernelState) {
	m := s.m
	tgt := &lioTarget{TPGs: map[int]*lioTPG{}}
	lifNode := map[int]string{}
	tag := 0
	for _, lif := range m.LIFs {
		if lif.SVM != svm.UUID || !contains(lif.Services, "data_iscsi") {
			continue
		}
		tag++ // by position, so a LIF keeps its tag while it is down
		if lif.Up {
			tgt.TPGs[tag] = &lioTPG{Portal: lif.IP + ":3260", LUNs: map[string]bool{}, ACLs: map[string]*lioACL{}}
			lifNode[tag] = lif.Node
		}
	}
	for _, g := range m.IGroups {
		if g.SVM != svm.UUID || g.Protocol == "fcp" {
			continue
		}
		for _, in := range g.Initiators {
			cred := m.chapFor(svm.UUID, in.Name)
			if cred != nil && cred.AuthType == "deny" {
				continue
			}
			if cred != nil && cred.AuthType != "chap" {
				cred = nil
			}
			for tag, tpg := range tgt.TPGs {
				if tpg.ACLs[in.Name] == nil {
					tpg.ACLs[in.Name] = &lioACL{CHAP: cred, LUNs: map[int]string{}}
				}
				for _, lm := range m.mapsOfIGroup(g.UUID) {
					l := m.LUNs[lm.LUN]
					if v := m.Volumes[l.Volume]; v == nil || v.State != "online" || !l.Enabled || !contains(lm.ReportingNodes, lifNode[tag]) {
						continue
					}
					st.backstores[l.UUID] = lioBackstore{File: s.lunFile(l.UUID), Size: l.Size, Serial: l.Serial}
					tpg.LUNs[l.UUID] = true
					tpg.ACLs[in.Name].LUNs[lm.ID] = l.UUID
				}
			}
		}
	}
	st.targets[svm.TargetIQN] = tgt
}

// desiredExports adds an nfsd export per rule and client of each online
// volume mounted below "/" (the SVM root is nfsd's NFSv4 pseudo root).
func (s *Simulator) desiredExports(svm *svmState, st *kernelState) {
	for _, v := range s.m.Volumes {
		if v.SVM != svm.UUID || v.State != "online" || v.JunctionPath == "" || v.JunctionPath == "/" {
			continue
		}
		pol := s.m.ExportPolicies[v.ExportPolicy]
		if pol == nil {
			continue
		}
		st.binds[v.JunctionPath] = s.volumeDir(v.UUID)
		for _, r := range sortedRules(pol) {
			opts, ok := exportOptions(r, v.UUID)
			if !ok {
				continue
			}
			for _, c := range r.Clients {
				for _, client := range exportClients(c) {
					key := client + ":" + v.JunctionPath
					if _, seen := st.exports[key]; !seen { // the first rule wins, as on ONTAP
						st.exports[key] = opts
					}
				}
			}
		}
	}
}

// exportOptions turns a rule into exportfs options; ok is false when the
// rule grants an AUTH_SYS client no access or not NFS.
func exportOptions(r *ruleState, fsid string) (string, bool) {
	nfs := false
	for _, p := range r.Protocols {
		if p == "any" || strings.HasPrefix(p, "nfs") {
			nfs = true
		}
	}
	if !nfs || !flavorAllows(r.RORule) {
		return "", false
	}
	opts := []string{"ro"}
	if flavorAllows(r.RWRule) {
		opts[0] = "rw"
	}
	if contains(r.Superuser, "any") || contains(r.Superuser, "sys") {
		opts = append(opts, "no_root_squash")
	} else {
		opts = append(opts, "root_squash")
	}
	if uid := r.AnonymousUser; uid != "" && strings.Trim(uid, "0123456789") == "" {
		opts = append(opts, "anonuid="+uid)
	}
	// ONTAP serves clients from any port (-nfs-rootonly disabled); the
	// volume's UUID identifies the export whatever file system holds it.
	opts = append(opts, "insecure", "no_subtree_check", "sec=sys", "fsid="+fsid)
	return strings.Join(opts, ","), true
}

// exportClients turns one clients.match into exportfs client names:
// addresses and subnets as they are, any-address subnets as "*" (mountd
// matches no client against 0.0.0.0/0), names skipped.
func exportClients(match string) []string {
	ms, err := parseClientMatch(match)
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range ms {
		switch {
		case m.ip != nil:
			out = append(out, m.ip.String())
		case m.net != nil:
			if ones, _ := m.net.Mask.Size(); ones == 0 {
				out = append(out, "*")
			} else {
				out = append(out, m.net.String())
			}
		}
	}
	sort.Strings(out)
	return out
}
