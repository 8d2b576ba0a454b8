package iscsi

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The sysfs layout used here is the kernel's stable ABI for software iSCSI
// (iscsi_tcp creates one SCSI host per session):
//
//	class/iscsi_session/session<S>/device -> devices/platform/host<H>/session<S>
//	  .../session<S>/iscsi_session/session<S>/target_id
//	  .../session<S>/target<H>:<C>:<T>/<H>:<C>:<T>:<L>/{vpd_pg80,rescan,delete,block/<sdX>}
//	class/scsi_host/host<H>/scan
//	block/<sdX>/{size,holders/<dm-N>}
//	block/<dm-N>/{size,dm/uuid,dm/name,slaves/<sdX>}

// sessionDevs is where one session's SCSI devices live.
type sessionDevs struct {
	session
	dir      string // .../host<H>/session<S>
	host     int
	targetID int
}

// sessionSysfs resolves the sysfs directory and SCSI host of session s.
func (c *Client) sessionSysfs(s session) (sessionDevs, error) {
	link := filepath.Join(c.sysRoot, "class", "iscsi_session", "session"+strconv.Itoa(s.ID), "device")
	dir, err := filepath.EvalSymlinks(link)
	if err != nil {
		return sessionDevs{}, fmt.Errorf("session %d: %w", s.ID, err)
	}
	if !c.underSys(dir) {
		return sessionDevs{}, fmt.Errorf("session %d: %s resolves outside %s", s.ID, link, c.sysRoot)
	}
	host, err := parseHostName(filepath.Base(filepath.Dir(dir)))
	if err != nil {
		return sessionDevs{}, fmt.Errorf("session %d: %w", s.ID, err)
	}
	sd := sessionDevs{session: s, dir: dir, host: host}
	// iscsi_tcp uses target id 0; offload drivers may not.
	if b, err := readAttr(filepath.Join(dir, "iscsi_session", "session"+strconv.Itoa(s.ID), "target_id")); err == nil {
		if id, err := parseSysfsInt(b); err == nil {
			sd.targetID = id
		}
	}
	return sd, nil
}

func (c *Client) underSys(p string) bool {
	root, err := filepath.EvalSymlinks(c.sysRoot)
	if err != nil {
		root = c.sysRoot
	}
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// scanFile is the host's scan attribute: writing "C T L" makes the kernel
// scan exactly that LUN.
func (c *Client) scanFile(sd sessionDevs) string {
	return filepath.Join(c.sysRoot, "class", "scsi_host", "host"+strconv.Itoa(sd.host), "scan")
}

// scsiDevice is one SCSI device (one path of a LUN) of a session.
type scsiDevice struct {
	addr scsiAddr
	dir  string // .../target<H>:<C>:<T>/<H>:<C>:<T>:<L>
	name string // block device name (sdb), "" until the kernel adds it
}

// sessionDevices lists the SCSI devices of a session; lun < 0 lists all.
func sessionDevices(sd sessionDevs, lun int) ([]scsiDevice, error) {
	targets, err := os.ReadDir(sd.dir)
	if err != nil {
		return nil, err
	}
	var devs []scsiDevice
	for _, t := range targets {
		if !strings.HasPrefix(t.Name(), "target") {
			continue
		}
		tdir := filepath.Join(sd.dir, t.Name())
		entries, err := os.ReadDir(tdir)
		if errors.Is(err, os.ErrNotExist) {
			continue // the kernel reaped an empty scsi_target meanwhile
		}
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			addr, err := parseSCSIAddr(e.Name())
			if err != nil || addr.Host != sd.host || (lun >= 0 && addr.LUN != lun) {
				continue
			}
			d := scsiDevice{addr: addr, dir: filepath.Join(tdir, e.Name())}
			d.name = blockNameOf(d.dir)
			devs = append(devs, d)
		}
	}
	return devs, nil
}

// blockNameOf returns the block device a SCSI device directory carries, or
// "" when there is none (yet).
func blockNameOf(devDir string) string {
	names, err := readDirNames(filepath.Join(devDir, "block"))
	if err != nil || len(names) != 1 || !validBlockName(names[0]) {
		return ""
	}
	return names[0]
}

func (c *Client) devSerial(d scsiDevice) (string, error) {
	b, err := readAttr(filepath.Join(d.dir, "vpd_pg80"))
	if err != nil {
		return "", err
	}
	s, err := parseVPDPage80(b)
	if err != nil {
		return "", fmt.Errorf("%s: %w", d.addr, err)
	}
	return s, nil
}

// blockSize returns a block device's size from sysfs, which never blocks
// (opening a device with failed paths can).
func (c *Client) blockSize(name string) (int64, error) {
	b, err := readAttr(filepath.Join(c.sysRoot, "block", name, "size"))
	if err != nil {
		return 0, err
	}
	return parseSectors(b)
}

// udevPending names the paths udev has not processed yet: those whose
// device number (sysfs "dev") has no entry b<major>:<minor> in udev's
// database, which udev writes when it has run its rules for the device's
// add event. Without a database to read, or a device number, it cannot
// tell and names none.
func (c *Client) udevPending(paths []pathDev) []string {
	if c.udevDir == "" {
		return nil
	}
	if fi, err := os.Stat(c.udevDir); err != nil || !fi.IsDir() {
		return nil
	}
	var late []string
	for _, p := range paths {
		if !validBlockName(p.dev.name) {
			continue
		}
		b, err := readAttr(filepath.Join(c.sysRoot, "block", p.dev.name, "dev"))
		if err != nil {
			continue
		}
		devno := strings.TrimSpace(string(b))
		if maj, min, ok := strings.Cut(devno, ":"); !ok || !digits(maj) || !digits(min) {
			continue
		}
		if _, err := os.Lstat(filepath.Join(c.udevDir, "b"+devno)); errors.Is(err, os.ErrNotExist) {
			late = append(late, p.dev.name)
		}
	}
	return late
}

func digits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

func (c *Client) holders(name string) ([]string, error) {
	names, err := readDirNames(filepath.Join(c.sysRoot, "block", name, "holders"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return names, err
}

// devNode returns the device node of a block device, symlinks resolved, or
// an error while it does not exist yet (udev/devtmpfs lag the sysfs entry).
func (c *Client) devNode(name string) (string, error) {
	if !validBlockName(name) {
		return "", fmt.Errorf("invalid block device name %q", name)
	}
	return filepath.EvalSymlinks(filepath.Join(c.devDir, name))
}

// inUse reports whether a block device is held: by a stacked device (a
// holder such as a dm map) or by an exclusive opener such as a mounted
// filesystem. The kernel refuses O_EXCL opens of a claimed device with
// EBUSY, which covers every kind of claim without parsing mountinfo.
func (c *Client) inUse(name string) (bool, error) {
	hs, err := c.holders(name)
	if err != nil {
		return false, err
	}
	if len(hs) > 0 {
		return true, nil
	}
	node, err := c.devNode(name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	fd, err := unix.Open(node, unix.O_RDONLY|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.EBUSY) {
		return true, nil
	}
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENXIO) {
			return false, nil
		}
		return false, fmt.Errorf("open %s: %w", node, err)
	}
	unix.Close(fd)
	return false, nil
}

// maxAttr bounds reads of sysfs attributes; sysfs serves at most a page.
const maxAttr = 8 << 10

func readAttr(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxAttr))
}

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// sysfsSessions reads the host's iSCSI sessions from sysfs the way
// iscsiadm does for `-m session`: per class/iscsi_session/session<S>, the
// target's name (targetname) and portal group tag (tpgt), and the portal
// from the leading connection's persistent_address and persistent_port
// (the portal logged in to, not one a login redirect moved to):
//
//	class/iscsi_session/session<S>/{targetname,tpgt,device -> .../session<S>}
//	  .../session<S>/connection<S>:<C>/iscsi_connection/connection<S>:<C>/{persistent_address,persistent_port}
//
// No iscsi_session class in a sysfs that has classes is "no session", as
// iscsiadm says: the class comes with the iSCSI transport module, which
// every login loads. ok is false, and the caller asks iscsiadm, when sysfs
// does not give the above for every session: a session caught between its
// creation and iscsid setting its parameters, or while it is torn down,
// or a sys root without classes at all.
func (c *Client) sysfsSessions() ([]session, bool) {
	entries, err := os.ReadDir(filepath.Join(c.sysRoot, "class", "iscsi_session"))
	if errors.Is(err, os.ErrNotExist) {
		if st, err := os.Stat(filepath.Join(c.sysRoot, "class")); err == nil && st.IsDir() {
			return nil, true
		}
	}
	if err != nil {
		return nil, false
	}
	var out []session
	for _, e := range entries {
		s, err := c.sysfsSession(e.Name())
		if err != nil {
			return nil, false
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b session) int { return a.ID - b.ID })
	return out, true
}

// sysfsSession reads one session of sysfsSessions.
func (c *Client) sysfsSession(name string) (session, error) {
	rest, ok := strings.CutPrefix(name, "session")
	if !ok {
		return session{}, fmt.Errorf("odd iscsi_session entry %q", truncate(name, 64))
	}
	sid, err := parseSmallUint(rest)
	if err != nil {
		return session{}, fmt.Errorf("odd iscsi_session entry %q", truncate(name, 64))
	}
	dir := filepath.Join(c.sysRoot, "class", "iscsi_session", name)
	b, err := readAttr(filepath.Join(dir, "targetname"))
	if err != nil {
		return session{}, err
	}
	s := session{ID: sid, Target: strings.TrimSpace(string(b))}
	if err := validateIQN(s.Target); err != nil {
		return session{}, fmt.Errorf("session %d: %w", sid, err)
	}
	if b, err := readAttr(filepath.Join(dir, "tpgt")); err == nil {
		s.TPGT, _ = parseSysfsInt(b)
	}
	sdir, err := filepath.EvalSymlinks(filepath.Join(dir, "device"))
	if err != nil {
		return session{}, err
	}
	conns, err := readDirNames(sdir)
	if err != nil {
		return session{}, err
	}
	prefix := "connection" + strconv.Itoa(sid) + ":"
	for _, cn := range conns {
		if _, ok := strings.CutPrefix(cn, prefix); !ok {
			continue
		}
		cdir := filepath.Join(sdir, cn, "iscsi_connection", cn)
		addr, err := readAttr(filepath.Join(cdir, "persistent_address"))
		if err != nil {
			return session{}, err
		}
		port, err := readAttr(filepath.Join(cdir, "persistent_port"))
		if err != nil {
			return session{}, err
		}
		if s.Portal, err = sysfsPortal(addr, port); err != nil {
			return session{}, fmt.Errorf("session %d: %w", sid, err)
		}
		return s, nil
	}
	return session{}, fmt.Errorf("session %d has no connection yet", sid)
}

// sysfsPortal makes a normalized portal of a connection's address and
// port attributes.
func sysfsPortal(addr, port []byte) (string, error) {
	a, p := strings.TrimSpace(string(addr)), strings.TrimSpace(string(port))
	if a == "" || p == "" || strings.ContainsAny(a, "[]") {
		return "", fmt.Errorf("invalid portal address %q port %q", truncate(a, 64), truncate(p, 8))
	}
	if _, err := parseSmallUint(p); err != nil {
		return "", fmt.Errorf("invalid portal port %q", truncate(p, 8))
	}
	return normalizePortal(net.JoinHostPort(a, p))
}
