package ontapsim

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// Quota enforcement on the file data plane. ONTAP refuses writes past a
// tree quota's hard limit, and an NFS client that mounts a qtree with a
// tree quota sees the limit as the size of the file system (NetApp KB "How
// Quotas display with NFS clients df output"; docs/design/economy.md §2).
// A directory offers neither, so with Config.QtreeQuotaMounts every qtree
// directory is a tmpfs mount whose size is the limit in force (the volume's
// size when there is none): writes past it fail with ENOSPC and statfs
// through the NFS shim's bind mount shows the limit. tmpfs keeps the data
// in memory; Close writes it back into the directory, New loads it again.
// Mounting needs root.

// quotaFS reports whether qtrees are tmpfs mounts.
func (s *Simulator) quotaFS() bool { return s.cfg.QtreeQuotaMounts }

// qtreeFSSize is the tmpfs size of q: its hard limit, or its volume's size.
func (s *Simulator) qtreeFSSize(q *qtreeState) int64 {
	size := s.m.qtreeLimit(q)
	if size <= 0 {
		if v := s.m.Volumes[q.Volume]; v != nil {
			size = v.Size
		}
	}
	return max(size, 4096)
}

// syncQtreeMount mounts q's tmpfs, or resizes it to the limit now in force.
// Called with mu held.
func (s *Simulator) syncQtreeMount(q *qtreeState) error {
	if !s.quotaFS() {
		return nil
	}
	dir, size := s.qtreeDir(q), s.qtreeFSSize(q)
	if s.qtreeMounts == nil {
		s.qtreeMounts = map[string]int64{}
	}
	cur, mounted := s.qtreeMounts[dir]
	switch {
	case mounted && cur == size:
		return nil
	case mounted:
		// tmpfs refuses to shrink below what it holds; ONTAP accepts such a
		// limit and refuses further writes, which the old size approximates.
		if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, "size="+strconv.FormatInt(size, 10)); err != nil {
			logrus.WithError(err).WithField("qtree", dir).Warn("ONTAP simulator: resizing a qtree's tmpfs failed")
			return nil
		}
	default:
		opts := fmt.Sprintf("size=%d,mode=%o", size, 0o755)
		if err := unix.Mount("ontap-sim-qtree", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("mounting the quota file system of qtree %s: %w", dir, err)
		}
	}
	s.qtreeMounts[dir] = size
	return nil
}

// syncVolumeQuotaMounts applies the limits in force to every qtree of v.
// Called with mu held. While quotas initialize nothing is enforced; the
// limits apply once initialization ends.
func (s *Simulator) syncVolumeQuotaMounts(v *volumeState) {
	if !s.quotaFS() {
		return
	}
	for _, q := range s.m.qtreesOf(v.UUID) {
		if err := s.syncQtreeMount(q); err != nil {
			logrus.WithError(err).Warn("ONTAP simulator: qtree quota mount")
		}
	}
	if qs := s.m.VolumeQuotas[v.UUID]; qs != nil && s.m.quotaState(v.UUID) == "initializing" {
		id := v.UUID
		go func() {
			s.sleep(time.Until(qs.InitDone))
			s.mu.Lock()
			defer s.mu.Unlock()
			if cur := s.m.Volumes[id]; cur != nil {
				s.syncVolumeQuotaMounts(cur)
			}
		}()
	}
}

// unmountQtree drops q's tmpfs (and its contents). Called with mu held.
func (s *Simulator) unmountQtree(q *qtreeState) error {
	dir := s.qtreeDir(q)
	if _, ok := s.qtreeMounts[dir]; !ok {
		return nil
	}
	// Detach: a node may still hold a bind mount of it (an NFS client
	// that did not unmount keeps its file handles too).
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return err
	}
	delete(s.qtreeMounts, dir)
	return nil
}

// moveQtreeDir renames q's directory to name, moving its mount with it.
func (s *Simulator) moveQtreeDir(q *qtreeState, name string) error {
	from, to := s.qtreeDir(q), filepath.Join(s.volumeDir(q.Volume), name)
	size, mounted := s.qtreeMounts[from]
	if !mounted {
		return os.Rename(from, to)
	}
	if err := os.Mkdir(to, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(from, to, "", unix.MS_MOVE, ""); err != nil {
		os.Remove(to)
		return err
	}
	delete(s.qtreeMounts, from)
	s.qtreeMounts[to] = size
	return os.Remove(from)
}

// mountQtreeFS mounts every qtree's tmpfs after a (re)start, moving the
// data saved by closeQtreeFS into it. Called from New.
func (s *Simulator) mountQtreeFS() error {
	if !s.quotaFS() {
		return nil
	}
	if os.Geteuid() != 0 {
		return errors.New("QtreeQuotaMounts needs root: qtrees are tmpfs mounts")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range s.m.Qtrees {
		dir := s.qtreeDir(q)
		save := dir + ".sim-save"
		if err := os.Rename(dir, save); err != nil {
			return err
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		if err := s.syncQtreeMount(q); err != nil {
			return err
		}
		if err := copyTree(save, dir); err != nil {
			return err
		}
		if err := os.RemoveAll(save); err != nil {
			return err
		}
		if err := s.applyQtreeMode(q); err != nil {
			return err
		}
	}
	return nil
}

// closeQtreeFS writes every qtree's data back into its directory and
// unmounts its tmpfs. Called by Close with mu held.
func (s *Simulator) closeQtreeFS() error {
	var errs []error
	for dir := range s.qtreeMounts {
		save := dir + ".sim-save"
		err := os.MkdirAll(save, 0o755)
		if err == nil && s.persistent {
			err = copyTree(dir, save)
		}
		if err == nil {
			err = unix.Unmount(dir, unix.MNT_DETACH)
		}
		if err == nil {
			err = os.RemoveAll(dir)
		}
		if err == nil {
			err = os.Rename(save, dir)
		}
		errs = append(errs, err)
		delete(s.qtreeMounts, dir)
	}
	return errors.Join(errs...)
}

// treeUsage is the space (bytes allocated) and the number of files below
// dir, the dir itself excluded.
func treeUsage(dir string) (int64, int64) {
	var files int64
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != dir {
			files++
		}
		return nil
	})
	used := diskUsage(dir) - fileAllocated(dir) // not the directory's own block
	return max(used, 0), files
}
