package shim

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ontap-csi/ontap-csi/internal/atomicfile"
)

// This file is the emulated kernel: what a SCSI scan, a rescan or a device
// delete does, expressed as real loop devices plus the sysfs and /dev
// entries the node plugin reads, under the test's roots. The layout follows
// the kernel's (see node/iscsi/sysfs.go).

func (e *Env) hostDir(host int) string {
	return filepath.Join(e.SysRoot, "devices", "platform", "host"+strconv.Itoa(host))
}

func (e *Env) sessionDir(s *Session) string {
	return filepath.Join(e.hostDir(s.Host), "session"+strconv.Itoa(s.SID))
}

func (e *Env) scsiHostDir(host int) string {
	h := "host" + strconv.Itoa(host)
	return filepath.Join(e.hostDir(host), "scsi_host", h)
}

func (e *Env) targetDir(s *Session) string {
	return filepath.Join(e.sessionDir(s), fmt.Sprintf("target%d:0:0", s.Host))
}

func (e *Env) deviceDir(s *Session, lun int) string {
	return filepath.Join(e.targetDir(s), fmt.Sprintf("%d:0:0:%d", s.Host, lun))
}

func (e *Env) mapDir(m *Map) string {
	return filepath.Join(e.SysRoot, "devices", "virtual", "block", m.Loop)
}

func (e *Env) byPath(s *Session, lun int) string {
	return filepath.Join(e.DevDir, "disk", "by-path", fmt.Sprintf("ip-%s-iscsi-%s-lun-%d", s.Portal, s.Target, lun))
}

// createSessionSysfs creates what the kernel shows for a new session.
func (e *Env) createSessionSysfs(s *Session) error {
	sid := "session" + strconv.Itoa(s.SID)
	host, port := s.Portal, "3260"
	if i := strings.LastIndex(s.Portal, ":"); i > 0 {
		host, port = strings.Trim(s.Portal[:i], "[]"), s.Portal[i+1:]
	}
	sdir := e.sessionDir(s)
	attrs := filepath.Join(sdir, "iscsi_session", sid)
	conn := filepath.Join(sdir, fmt.Sprintf("connection%d:0", s.SID), "iscsi_connection", fmt.Sprintf("connection%d:0", s.SID))
	if err := writeFiles(attrs, map[string]string{
		"targetname": s.Target + "\n", "tpgt": "1\n", "ifacename": s.Iface + "\n",
		"initiatorname": s.Initiator + "\n", "state": "LOGGED_IN\n", "target_id": "0\n",
	}); err != nil {
		return err
	}
	if err := writeFiles(conn, map[string]string{
		"persistent_address": host + "\n", "persistent_port": port + "\n", "address": host + "\n", "port": port + "\n",
	}); err != nil {
		return err
	}
	if err := relLink(sdir, filepath.Join(attrs, "device")); err != nil {
		return err
	}
	if err := writeFiles(e.scsiHostDir(s.Host), map[string]string{"scan": "", "proc_name": "iscsi_tcp\n"}); err != nil {
		return err
	}
	if err := relLink(e.scsiHostDir(s.Host), filepath.Join(e.SysRoot, "class", "scsi_host", "host"+strconv.Itoa(s.Host))); err != nil {
		return err
	}
	return relLink(attrs, filepath.Join(e.SysRoot, "class", "iscsi_session", sid))
}

func (e *Env) removeSessionSysfs(s *Session) error {
	for _, p := range []string{
		filepath.Join(e.SysRoot, "class", "iscsi_session", "session"+strconv.Itoa(s.SID)),
		filepath.Join(e.SysRoot, "class", "scsi_host", "host"+strconv.Itoa(s.Host)),
	} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return os.RemoveAll(e.hostDir(s.Host))
}

// addDevice is a successful probe of LUN l on session s: a loop device over
// the LUN's file and its sysfs device and block directories; udev's /dev
// and by-path links and (multipathd running) its multipath map come later
// (udev.go).
func (e *Env) addDevice(st *State, s *Session, l simLUN) error {
	if !filepath.IsAbs(l.File) {
		return fmt.Errorf("LUN %d: backing file %q is not absolute", l.LUN, l.File)
	}
	loop, err := st.attachLoop(l.File)
	if err != nil {
		return err
	}
	d := &Device{LUN: l.LUN, Loop: loop, File: l.File, Serial: l.Serial}
	s.Devices = append(s.Devices, d) // recorded before anything can fail
	sectors, err := loopSectors(loop)
	if err != nil {
		return err
	}
	wwid := ontapWWID(l.Serial)
	final := e.deviceDir(s, l.LUN)
	// Built under a temporary name and renamed, so a reader never sees a
	// device without its attributes.
	tmp := filepath.Join(filepath.Dir(final), ".new-"+filepath.Base(final))
	os.RemoveAll(tmp)
	if err := writeFiles(tmp, map[string]string{
		"vendor": "NETAPP  \n", "model": "LUN C-Mode      \n", "rev": "9800\n", "state": "running\n",
		"wwid": "naa." + strings.TrimPrefix(wwid, "3") + "\n", "rescan": "", "delete": "",
	}); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "vpd_pg80"), vpdPage80(l.Serial), 0o644); err != nil {
		return err
	}
	blk := filepath.Join(tmp, "block", loop)
	if err := writeFiles(blk, map[string]string{"size": sectors + "\n", "dev": loopDevNumbers(loop) + "\n"}); err != nil {
		return err
	}
	for _, sub := range []string{"holders", "slaves"} {
		if err := os.MkdirAll(filepath.Join(blk, sub), 0o755); err != nil {
			return err
		}
	}
	if err := os.Symlink("../..", filepath.Join(blk, "device")); err != nil {
		return err
	}
	if err := relLink(filepath.Join(final, "block", loop), filepath.Join(e.SysRoot, "block", loop)); err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	st.schedule(pendingUdev, s, d, e.UdevDelay)
	return nil
}

// removeDevice is a device delete (or a logout): the path leaves its map,
// its loop device is detached and its entries are removed.
func (e *Env) removeDevice(st *State, s *Session, d *Device) error {
	st.unschedule(s, d)
	if m := st.mapBySerial(d.Serial); m != nil {
		e.dropFromMap(m, d.Loop)
	}
	if err := loopDetach(d.Loop, d.File); err != nil {
		return err
	}
	for _, p := range []string{e.byPath(s, d.LUN), filepath.Join(e.DevDir, d.Loop), filepath.Join(e.SysRoot, "block", d.Loop)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if err := os.RemoveAll(e.deviceDir(s, d.LUN)); err != nil {
		return err
	}
	os.Remove(e.targetDir(s)) // the kernel reaps an empty scsi_target
	for i, x := range s.Devices {
		if x == d {
			s.Devices = append(s.Devices[:i], s.Devices[i+1:]...)
			break
		}
	}
	return nil
}

// rescanDevice re-reads the LUN's capacity, as a SCSI rescan does. The
// serial stays what the scan found (VPD data is cached by the kernel).
func (e *Env) rescanDevice(s *Session, d *Device) error {
	if err := loopCapacity(d.Loop); err != nil {
		return err
	}
	sectors, err := loopSectors(d.Loop)
	if err != nil {
		return err
	}
	return replaceAttr(filepath.Join(e.deviceDir(s, d.LUN), "block", d.Loop, "size"), sectors+"\n")
}

// ontapWWID is the NAA-6 identifier ONTAP gives a LUN, as multipath shows
// it: "3" + "600a0980" (NetApp OUI) + hex(serial).
func ontapWWID(serial string) string { return "3600a0980" + hex.EncodeToString([]byte(serial)) }

func vpdPage80(serial string) []byte {
	return append([]byte{0x00, 0x80, 0x00, byte(len(serial))}, serial...)
}

// ---- loop devices (real) ----

// The loop devices are set up with losetup's ioctls rather than by
// running it: an exec per device, made under the state's lock, was most
// of what capped concurrent attaches and deletes (issue 18).

// loopAttach binds a free loop device to file, as losetup --find --show:
// another process may take the free device first (EBUSY), then it tries
// the next one.
func loopAttach(file string) (string, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer ctl.Close()
	backing, err := os.OpenFile(file, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer backing.Close()
	var last error
	for range 100 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", fmt.Errorf("LOOP_CTL_GET_FREE: %w", err)
		}
		name := "loop" + strconv.Itoa(n)
		dev, err := os.OpenFile("/dev/"+name, os.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			// devtmpfs makes the node a moment after the device.
			last = err
			time.Sleep(time.Millisecond)
			continue
		}
		cfg := unix.LoopConfig{Fd: uint32(backing.Fd())}
		copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], file)
		err = unix.IoctlLoopConfigure(int(dev.Fd()), &cfg)
		dev.Close()
		if errors.Is(err, unix.EBUSY) {
			last = err
			continue
		}
		if err != nil {
			return "", fmt.Errorf("LOOP_CONFIGURE /dev/%s over %s: %w", name, file, err)
		}
		return name, nil
	}
	return "", fmt.Errorf("no free loop device for %s: %w", file, last)
}

// loopDetach detaches a loop device if it is still bound to backing: loop
// numbers are reused, and a number freed by us may be someone else's now.
// A loop still open (mounted, or under a stacked map) is only marked for
// detach at last close, by the kernel.
func loopDetach(name, backing string) error {
	b, err := os.ReadFile(filepath.Join("/sys/block", name, "loop", "backing_file"))
	if err != nil || strings.TrimSpace(string(b)) != backing {
		return nil
	}
	return loopIoctl(name, unix.LOOP_CLR_FD, "LOOP_CLR_FD")
}

// loopCapacity re-reads the backing file's size (losetup -c).
func loopCapacity(name string) error {
	return loopIoctl(name, unix.LOOP_SET_CAPACITY, "LOOP_SET_CAPACITY")
}

func loopIoctl(name string, req uint, what string) error {
	dev, err := os.OpenFile("/dev/"+name, os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer dev.Close()
	if err := unix.IoctlSetInt(int(dev.Fd()), req, 0); err != nil {
		return fmt.Errorf("%s /dev/%s: %w", what, name, err)
	}
	return nil
}

func loopSectors(name string) (string, error) {
	b, err := os.ReadFile(filepath.Join("/sys/block", name, "size"))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func loopDevNumbers(name string) string {
	b, err := os.ReadFile(filepath.Join("/sys/block", name, "dev"))
	if err != nil {
		return "7:0"
	}
	return strings.TrimSpace(string(b))
}

// deviceBusy reports whether a block device is claimed (mounted,
// stacked on), the way the kernel refuses to remove a map in use.
func deviceBusy(name string) bool {
	fd, err := unix.Open("/dev/"+name, unix.O_RDONLY|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return errors.Is(err, unix.EBUSY)
	}
	unix.Close(fd)
	return false
}

// ---- files ----

func writeFiles(dir string, files map[string]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// replaceAttr gives an existing attribute file new content, as a reader of
// sysfs sees it change: at once, whole. An in-place rewrite would let a
// reader find it empty between the truncate and the write (a node/iscsi
// test read a size of "" so, once, during a rescan); the kernel builds an
// attribute's content at each read.
func replaceAttr(path, content string) error {
	return atomicfile.Write(path, "."+filepath.Base(path)+".new-*", []byte(content), 0o644, false)
}

// relLink makes link point to target with a relative path, as sysfs does.
func relLink(target, link string) error {
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(link), target)
	if err != nil {
		return err
	}
	os.Remove(link)
	return os.Symlink(rel, link)
}

func exitText(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return err
}
