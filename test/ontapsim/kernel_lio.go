package ontapsim

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LIO through configfs (Documentation/target in the kernel tree): a
// backstore is core/fileio_<hba>/<name> with "control", "enable" and wwn/;
// a target is iscsi/<iqn>/tpgt_<tag>/ with np/<ip>:<port>, lun/lun_<n>/
// (a symlink to the backstore), acls/<initiator>/lun_<id>/ (a symlink to
// lun/lun_<n>), attrib/, auth/ and enable.

// lioTPGState is a TPG as configfs shows it.
type lioTPGState struct {
	portals []string
	luns    map[int]string         // TPG LUN index -> backstore name
	acls    map[string]map[int]int // initiator -> LUN ID -> TPG LUN index
	enabled bool
}

func (k *kernelPlane) hbaDir() string {
	return filepath.Join(k.configfs, "core", fmt.Sprintf("fileio_%d", kernelHBA))
}

// apply reconciles the kernel with want: backstores first (TPG LUNs link
// to them), then targets, then the backstores nothing exports any more,
// then the NFS exports.
func (k *kernelPlane) apply(want kernelState) error {
	var errs []error
	backstores, err := k.readBackstores()
	if err != nil {
		return err
	}
	for name, b := range want.backstores {
		errs = append(errs, k.ensureBackstore(name, b, backstores[name]))
	}
	targets, err := k.readTargets()
	if err != nil {
		return err
	}
	for iqn, tpgs := range targets {
		if want.targets[iqn] == nil {
			errs = append(errs, k.removeTarget(iqn, tpgs))
		}
	}
	for iqn, t := range want.targets {
		errs = append(errs, k.syncTarget(iqn, t, targets[iqn]))
	}
	for name := range backstores {
		if _, ok := want.backstores[name]; !ok {
			errs = append(errs, os.Remove(filepath.Join(k.hbaDir(), name)))
		}
	}
	errs = append(errs, k.applyNFS(want))
	return errors.Join(errs...)
}

// readBackstores lists the simulator's backstores with their file, size
// and serial.
func (k *kernelPlane) readBackstores() (map[string]*lioBackstore, error) {
	out := map[string]*lioBackstore{}
	entries, err := os.ReadDir(k.hbaDir())
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue // hba_info, hba_mode
		}
		dir := filepath.Join(k.hbaDir(), e.Name())
		info, _ := os.ReadFile(filepath.Join(dir, "info"))
		serial, _ := os.ReadFile(filepath.Join(dir, "wwn", "vpd_unit_serial"))
		b := parseFileioInfo(string(info))
		_, sn, _ := strings.Cut(string(serial), "Number: ")
		b.Serial = strings.TrimSpace(sn)
		out[e.Name()] = &b
	}
	return out, nil
}

// parseFileioInfo reads a fileio backstore's "info":
//
//	Status: ACTIVATED  Max Queue Depth: 0  SectorSize: 512  HwMaxSectors: 16384
//	        TCM FILEIO ID: 0        File: /tmp/lun0.img  Size: 134217728  Mode: O_DSYNC Async: 0
func parseFileioInfo(info string) lioBackstore {
	var b lioBackstore
	fields := strings.Fields(info)
	for i := 0; i+1 < len(fields); i++ {
		switch fields[i] {
		case "File:":
			b.File = fields[i+1]
		case "Size:":
			b.Size, _ = strconv.ParseInt(fields[i+1], 10, 64)
		}
	}
	return b
}

// ensureBackstore creates a backstore, or grows it: a fileio backstore
// over a regular file reports the size it was told (fd_dev_size), which
// can be changed while it is exported; the initiator sees it on a rescan.
func (k *kernelPlane) ensureBackstore(name string, want lioBackstore, have *lioBackstore) error {
	dir := filepath.Join(k.hbaDir(), name)
	if have != nil && have.File == want.File && have.Serial == want.Serial {
		if have.Size == want.Size {
			return nil
		}
		return writeAttr(filepath.Join(dir, "control"), fmt.Sprintf("fd_dev_size=%d", want.Size))
	}
	if have != nil {
		return fmt.Errorf("LIO backstore %s is %s (serial %s), want %s (serial %s)", name, have.File, have.Serial, want.File, want.Serial)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, a := range []struct{ file, value string }{
		{"control", fmt.Sprintf("fd_dev_name=%s,fd_dev_size=%d", want.File, want.Size)},
		// Before enable and export: LIO refuses these on an exported LUN.
		{"wwn/vpd_unit_serial", want.Serial},
		{"wwn/vendor_id", "NETAPP"},
		{"wwn/product_id", "LUN C-Mode"},
		{"enable", "1"},
		// Linux asks for WRITE SAME of 8192 blocks whatever the
		// backstore's limit (4096), and mkfs's zeroing then fails.
		{"attrib/max_write_same_len", "65535"},
	} {
		if err := writeAttr(filepath.Join(dir, a.file), a.value); err != nil {
			return fmt.Errorf("LIO backstore %s: %w", name, err)
		}
	}
	return nil
}

// readTargets lists the simulator's targets (NetApp IQNs) with their TPGs.
func (k *kernelPlane) readTargets() (map[string]map[int]*lioTPGState, error) {
	out := map[string]map[int]*lioTPGState{}
	entries, err := os.ReadDir(filepath.Join(k.configfs, "iscsi"))
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), netappIQNPrefix) {
			continue
		}
		tpgs := map[int]*lioTPGState{}
		tdir := filepath.Join(k.configfs, "iscsi", e.Name())
		for _, name := range subdirs(tdir, "tpgt_") {
			tag, err := strconv.Atoi(strings.TrimPrefix(name, "tpgt_"))
			if err != nil {
				continue
			}
			tpgs[tag] = readTPG(filepath.Join(tdir, name))
		}
		out[e.Name()] = tpgs
	}
	return out, nil
}

func readTPG(dir string) *lioTPGState {
	t := &lioTPGState{portals: subdirs(filepath.Join(dir, "np"), ""), luns: map[int]string{}, acls: map[string]map[int]int{}}
	for _, l := range subdirs(filepath.Join(dir, "lun"), "lun_") {
		n, err := strconv.Atoi(strings.TrimPrefix(l, "lun_"))
		if target := linkIn(filepath.Join(dir, "lun", l)); err == nil && target != "" {
			t.luns[n] = filepath.Base(target)
		}
	}
	for _, ini := range subdirs(filepath.Join(dir, "acls"), "") {
		mapped := map[int]int{}
		for _, l := range subdirs(filepath.Join(dir, "acls", ini), "lun_") {
			id, err := strconv.Atoi(strings.TrimPrefix(l, "lun_"))
			target := filepath.Base(linkIn(filepath.Join(dir, "acls", ini, l)))
			n, err2 := strconv.Atoi(strings.TrimPrefix(target, "lun_"))
			if err == nil && err2 == nil {
				mapped[id] = n
			} else if err == nil {
				mapped[id] = -1 // dangling: removed and made again
			}
		}
		t.acls[ini] = mapped
	}
	en, _ := os.ReadFile(filepath.Join(dir, "enable"))
	t.enabled = strings.TrimSpace(string(en)) == "1"
	return t
}

func (k *kernelPlane) removeTarget(iqn string, tpgs map[int]*lioTPGState) error {
	var errs []error
	dir := filepath.Join(k.configfs, "iscsi", iqn)
	for tag, t := range tpgs {
		errs = append(errs, removeTPG(filepath.Join(dir, fmt.Sprintf("tpgt_%d", tag)), t))
	}
	errs = append(errs, os.Remove(dir))
	return errors.Join(errs...)
}

// removeTPG takes a TPG down (its sessions end) and removes it.
func removeTPG(dir string, t *lioTPGState) error {
	var errs []error
	if t.enabled {
		errs = append(errs, writeAttr(filepath.Join(dir, "enable"), "0"))
	}
	for ini, mapped := range t.acls {
		errs = append(errs, removeACL(dir, ini, mapped))
	}
	for n := range t.luns {
		errs = append(errs, removeLinkDir(filepath.Join(dir, "lun", fmt.Sprintf("lun_%d", n))))
	}
	for _, p := range t.portals {
		errs = append(errs, os.Remove(filepath.Join(dir, "np", p)))
	}
	errs = append(errs, os.Remove(dir))
	return errors.Join(errs...)
}

func removeACL(tpg, ini string, mapped map[int]int) error {
	var errs []error
	for id := range mapped {
		errs = append(errs, removeLinkDir(filepath.Join(tpg, "acls", ini, fmt.Sprintf("lun_%d", id))))
	}
	errs = append(errs, os.Remove(filepath.Join(tpg, "acls", ini)))
	return errors.Join(errs...)
}

// syncTarget makes one target match: TPGs, their portal, LUNs and ACLs.
func (k *kernelPlane) syncTarget(iqn string, want *lioTarget, have map[int]*lioTPGState) error {
	dir := filepath.Join(k.configfs, "iscsi", iqn)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var errs []error
	for tag, t := range have {
		if want.TPGs[tag] == nil {
			errs = append(errs, removeTPG(filepath.Join(dir, fmt.Sprintf("tpgt_%d", tag)), t))
		}
	}
	for tag, t := range want.TPGs {
		errs = append(errs, k.syncTPG(filepath.Join(dir, fmt.Sprintf("tpgt_%d", tag)), t, have[tag]))
	}
	return errors.Join(errs...)
}

func (k *kernelPlane) syncTPG(dir string, want *lioTPG, have *lioTPGState) error {
	if have == nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		have = readTPG(dir)
	}
	var errs []error
	for _, p := range have.portals {
		if p != want.Portal {
			errs = append(errs, os.Remove(filepath.Join(dir, "np", p)))
		}
	}
	if !contains(have.portals, want.Portal) {
		errs = append(errs, os.Mkdir(filepath.Join(dir, "np", want.Portal), 0o755))
	}
	// Unmaps first, then the TPG LUNs nothing maps, then what is new.
	for ini, mapped := range have.acls {
		wa := want.ACLs[ini]
		if wa == nil {
			errs = append(errs, removeACL(dir, ini, mapped))
			continue
		}
		for id, n := range mapped {
			if bs, ok := have.luns[n]; !ok || wa.LUNs[id] != bs {
				errs = append(errs, removeLinkDir(filepath.Join(dir, "acls", ini, fmt.Sprintf("lun_%d", id))))
				delete(mapped, id)
			}
		}
	}
	index := map[string]int{}
	for n, bs := range have.luns {
		if !want.LUNs[bs] {
			errs = append(errs, removeLinkDir(filepath.Join(dir, "lun", fmt.Sprintf("lun_%d", n))))
			continue
		}
		index[bs] = n
	}
	for bs := range want.LUNs {
		if _, ok := index[bs]; !ok {
			n, err := k.addTPGLUN(dir, bs, index)
			errs = append(errs, err)
			index[bs] = n
		}
	}
	for ini, wa := range want.ACLs {
		errs = append(errs, syncACL(dir, ini, wa, have.acls[ini], index))
	}
	// The ACLs decide about CHAP (syncACL); the TPG asks for none, as
	// ONTAP's discovery does not.
	errs = append(errs, writeAttr(filepath.Join(dir, "attrib", "authentication"), "0"))
	if !have.enabled {
		errs = append(errs, writeAttr(filepath.Join(dir, "enable"), "1"))
	}
	return errors.Join(errs...)
}

// addTPGLUN exports a backstore on the TPG at its lowest free LUN index.
func (k *kernelPlane) addTPGLUN(tpg, bs string, index map[string]int) (int, error) {
	used := map[int]bool{}
	for _, n := range index {
		used[n] = true
	}
	n := 0
	for used[n] {
		n++
	}
	dir := filepath.Join(tpg, "lun", fmt.Sprintf("lun_%d", n))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return n, err
	}
	return n, os.Symlink(filepath.Join(k.hbaDir(), bs), filepath.Join(dir, "backstore"))
}

// syncACL makes one initiator's ACL: CHAP and its LUNs at their IDs.
func syncACL(tpg, ini string, want *lioACL, have map[int]int, index map[string]int) error {
	dir := filepath.Join(tpg, "acls", ini)
	if have == nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	var errs []error
	auth := map[string]string{"userid": "NULL", "password": "NULL", "userid_mutual": "NULL", "password_mutual": "NULL"}
	required := "0"
	if c := want.CHAP; c != nil {
		required = "1"
		auth["userid"], auth["password"] = c.InboundUser, c.InboundPass
		if c.OutboundUser != "" {
			auth["userid_mutual"], auth["password_mutual"] = c.OutboundUser, c.OutboundPass
		}
	}
	for name, v := range auth {
		errs = append(errs, writeAttr(filepath.Join(dir, "auth", name), v))
	}
	errs = append(errs, writeAttr(filepath.Join(dir, "attrib", "authentication"), required))
	for id, bs := range want.LUNs {
		n, ok := index[bs]
		if _, mapped := have[id]; mapped || !ok {
			continue
		}
		lun := filepath.Join(dir, fmt.Sprintf("lun_%d", id))
		if err := os.Mkdir(lun, 0o755); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, os.Symlink(filepath.Join(tpg, "lun", fmt.Sprintf("lun_%d", n)), filepath.Join(lun, "lun")))
	}
	return errors.Join(errs...)
}

// subdirs lists the directories in dir whose names start with prefix.
func subdirs(dir, prefix string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// linkIn returns the target of the first symlink in dir ("" if none).
func linkIn(dir string) string {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(filepath.Join(dir, e.Name()))
			return target
		}
	}
	return ""
}

// removeLinkDir removes a LUN directory: its symlinks, then itself.
func removeLinkDir(dir string) error {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink != 0 {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return os.Remove(dir)
}

// writeAttr writes a configfs attribute in one write, as the kernel wants,
// without a newline: LIO keeps one in CHAP names and secrets.
func writeAttr(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte(value))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
