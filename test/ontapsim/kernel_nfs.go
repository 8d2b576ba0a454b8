package ontapsim

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
	mount "k8s.io/mount-utils"
)

// nfsd exports: each mounted volume's directory is bind-mounted at
// <NFSRoot>/<junction>, and nfs.conf's [exports] rootdir=<NFSRoot> makes
// exportfs, mountd and nfsd take "/<junction>" relative to it, for NFSv3
// mounts and NFSv4's pseudo file system alike.

// etab is where exportfs keeps the kernel's export table.
const etab = "/var/lib/nfs/etab"

// adoptNFS takes over the exports and bind mounts a previous simulator
// left below NFSRoot, so that sync updates or removes them.
func (k *kernelPlane) adoptNFS() error {
	f, err := os.Open(etab)
	if err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			path, rest, ok := strings.Cut(sc.Text(), "\t")
			client, _, _ := strings.Cut(rest, "(")
			if ok && client != "" {
				k.exports[client+":"+path] = "" // options unknown: made again
			}
		}
		f.Close()
	}
	infos, err := mount.ParseMountInfo("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	for _, mi := range infos {
		if rel, ok := strings.CutPrefix(mi.MountPoint, k.nfsRoot+"/"); ok {
			k.binds["/"+rel] = "" // source unknown: checked by sync
		}
	}
	return nil
}

// applyNFS makes exports and bind mounts match want: unexport, unmount,
// mount, export, so that nothing is exported that is not mounted.
func (k *kernelPlane) applyNFS(want kernelState) error {
	var errs []error
	for key := range k.exports {
		if _, ok := want.exports[key]; !ok {
			errs = append(errs, k.run("-u", key))
			delete(k.exports, key)
		}
	}
	junctions := make([]string, 0, len(k.binds))
	for j := range k.binds {
		junctions = append(junctions, j)
	}
	sort.Slice(junctions, func(a, b int) bool { return len(junctions[a]) > len(junctions[b]) }) // deepest first
	for _, j := range junctions {
		src, ok := want.binds[j]
		if ok && (k.binds[j] == src || k.binds[j] == "" && sameFile(src, k.nfsRoot+j)) {
			k.binds[j] = src
			continue
		}
		errs = append(errs, k.unbind(j))
	}
	junctions = junctions[:0]
	for j := range want.binds {
		if _, ok := k.binds[j]; !ok {
			junctions = append(junctions, j)
		}
	}
	sort.Slice(junctions, func(a, b int) bool { return len(junctions[a]) < len(junctions[b]) }) // parents first
	for _, j := range junctions {
		mp := k.nfsRoot + j
		if err := os.MkdirAll(mp, 0o755); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := unix.Mount(want.binds[j], mp, "", unix.MS_BIND, ""); err != nil {
			errs = append(errs, fmt.Errorf("bind %s at %s: %w", want.binds[j], mp, err))
			continue
		}
		k.binds[j] = want.binds[j]
	}
	for key, opts := range want.exports {
		if k.exports[key] == opts {
			continue
		}
		if err := k.run("-o", opts, key); err != nil {
			errs = append(errs, err)
			continue
		}
		k.exports[key] = opts
	}
	return errors.Join(errs...)
}

// unbind unmounts a junction (lazily if nfsd still holds it) and removes
// its mount point.
func (k *kernelPlane) unbind(j string) error {
	mp := k.nfsRoot + j
	err := unix.Unmount(mp, 0)
	if err != nil && !errors.Is(err, unix.EINVAL) {
		err = unix.Unmount(mp, unix.MNT_DETACH)
	}
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", mp, err)
	}
	delete(k.binds, j)
	// Empty parents up to NFSRoot go too.
	for d := mp; d != k.nfsRoot && strings.HasPrefix(d, k.nfsRoot+"/"); d = filepath.Dir(d) {
		if os.Remove(d) != nil {
			break
		}
	}
	return nil
}

func (k *kernelPlane) run(args ...string) error {
	if out, err := exec.Command(k.exportfs, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("exportfs %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// sameFile reports whether a and b are the same directory (a bind mount
// shows its source's inode).
func sameFile(a, b string) bool {
	var sa, sb unix.Stat_t
	return unix.Stat(a, &sa) == nil && unix.Stat(b, &sb) == nil && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}
