package ontapsim

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Backing store layout under the data dir:
//
//	volumes/<volume-uuid>/              the volume's NFS-visible content
//	luns/<lun-uuid>.img                 a LUN, a sparse file of the LUN's size
//	snapshots/<snapshot-uuid>/data/     copy of the volume directory
//	snapshots/<snapshot-uuid>/luns/     copies of the volume's LUN files
//
// Copies are sparse (reflink when the filesystem can, else SEEK_DATA /
// SEEK_HOLE), so snapshots and clones of big, mostly empty LUNs are cheap.
// Directory names are UUIDs the simulator generated, never request text.

func (s *Simulator) volumeDir(uuid string) string {
	return filepath.Join(s.dataDir, "volumes", uuid)
}

func (s *Simulator) lunFile(uuid string) string {
	return filepath.Join(s.dataDir, "luns", uuid+".img")
}

func (s *Simulator) snapshotDir(uuid string) string {
	return filepath.Join(s.dataDir, "snapshots", uuid)
}

func (s *Simulator) snapshotLUNFile(snap, lun string) string {
	return filepath.Join(s.snapshotDir(snap), "luns", lun+".img")
}

// octalMode converts ONTAP's digit form (755, 4755) to a mode.
func octalMode(digits int) (uint32, error) {
	n, err := strconv.ParseUint(strconv.Itoa(digits), 8, 32)
	if err != nil || n > 0o7777 {
		return 0, fmt.Errorf("invalid unix permissions %d", digits)
	}
	return uint32(n), nil
}

func (s *Simulator) createVolumeDir(v *volumeState) error {
	dir := s.volumeDir(v.UUID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return s.applyVolumeOwnership(v)
}

// applyVolumeOwnership sets the volume root's mode and owner from
// nas.unix_permissions/uid/gid, as an NFS client would see them.
func (s *Simulator) applyVolumeOwnership(v *volumeState) error {
	dir := s.volumeDir(v.UUID)
	mode, err := octalMode(v.UnixPermissions)
	if err != nil {
		return err
	}
	if err := unix.Chmod(dir, mode); err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		return os.Lchown(dir, v.UID, v.GID)
	}
	return nil
}

func (s *Simulator) createLUNFile(l *lunState) error {
	f, err := os.OpenFile(s.lunFile(l.UUID), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if err := f.Truncate(l.Size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// resizeLUNFile grows the file in place (a loop device over it stays valid).
func (s *Simulator) resizeLUNFile(l *lunState) error {
	return os.Truncate(s.lunFile(l.UUID), l.Size)
}

// copyFileSparse makes dst's content equal to src's, reusing dst's inode
// when it exists (so a restored LUN keeps its loop device).
func copyFileSparse(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	defer out.Close()
	if err := unix.IoctlFileClone(int(out.Fd()), int(in.Fd())); err == nil {
		return out.Close()
	}
	size := fi.Size()
	if err := out.Truncate(size); err != nil {
		return err
	}
	infd := int(in.Fd())
	for off := int64(0); off < size; {
		data, err := unix.Seek(infd, off, unix.SEEK_DATA)
		if errors.Is(err, syscall.ENXIO) {
			break // only a hole remains
		}
		if err != nil { // no SEEK_DATA support: copy the rest densely
			data = off
		}
		hole, err := unix.Seek(infd, data, unix.SEEK_HOLE)
		if err != nil || hole > size {
			hole = size
		}
		if _, err := io.Copy(io.NewOffsetWriter(out, data), io.NewSectionReader(in, data, hole-data)); err != nil {
			return err
		}
		off = hole
	}
	return out.Close()
}

// copyTree copies the content of src into dst (which must exist), keeping
// modes, owners and sparseness. Sockets and devices are skipped.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st, _ := info.Sys().(*syscall.Stat_t)
		switch {
		case info.IsDir():
			if err := os.Mkdir(target, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			if err := unix.Chmod(target, uint32(info.Mode().Perm())|specialBits(info.Mode())); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			if err := copyFileSparse(p, target, info.Mode().Perm()); err != nil {
				return err
			}
			if err := unix.Chmod(target, uint32(info.Mode().Perm())|specialBits(info.Mode())); err != nil {
				return err
			}
		case info.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
		default:
			return nil
		}
		if st != nil && os.Geteuid() == 0 {
			return os.Lchown(target, int(st.Uid), int(st.Gid))
		}
		return nil
	})
}

func specialBits(m fs.FileMode) uint32 {
	var b uint32
	if m&fs.ModeSetuid != 0 {
		b |= unix.S_ISUID
	}
	if m&fs.ModeSetgid != 0 {
		b |= unix.S_ISGID
	}
	if m&fs.ModeSticky != 0 {
		b |= unix.S_ISVTX
	}
	return b
}

// clearDir removes the content of dir but not dir itself, so bind mounts of
// it (the NFS shim) see the new content.
func clearDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// diskUsage sums allocated bytes below path (0 if it is missing).
func diskUsage(path string) int64 {
	var total int64
	_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				total += st.Blocks * 512
			}
		}
		return nil
	})
	return total
}

// snapshotData copies the volume's directory and LUN files into the
// snapshot's area.
func (s *Simulator) snapshotData(v *volumeState, sn *snapshotState, luns []*lunState) error {
	dir := s.snapshotDir(sn.UUID)
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "luns"), 0o700); err != nil {
		return err
	}
	if err := copyTree(s.volumeDir(v.UUID), filepath.Join(dir, "data")); err != nil {
		return err
	}
	if fi, err := os.Stat(s.volumeDir(v.UUID)); err == nil {
		if err := os.Chmod(filepath.Join(dir, "data"), fi.Mode()); err != nil {
			return err
		}
	}
	for _, l := range luns {
		if err := copyFileSparse(s.lunFile(l.UUID), s.snapshotLUNFile(sn.UUID, l.UUID), 0o600); err != nil {
			return err
		}
	}
	return nil
}
