// Package loopdev finds and detaches the loop devices a test left on files
// under its root. The iSCSI shim attaches one per LUN path (over the
// simulator's LUN file) and one per multipath map (over a path's device);
// loop devices are global, so the cluster's teardown must detach them.
package loopdev

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Under lists the loop devices (/dev/loopN) backed by a file under root, or
// stacked on such a device, stacked ones first: the order to detach them.
func Under(root string) []string {
	backing := map[string]string{}
	entries, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range entries {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		dev := "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(f)))
		backing[dev] = strings.TrimSpace(strings.TrimSuffix(string(b), " (deleted)"))
	}
	ours := map[string]int{} // device → stacking depth
	for changed := true; changed; {
		changed = false
		for dev, file := range backing {
			if _, done := ours[dev]; done {
				continue
			}
			if strings.HasPrefix(file, root+"/") {
				ours[dev], changed = 0, true
			} else if d, ok := ours[file]; ok {
				ours[dev], changed = d+1, true
			}
		}
	}
	out := make([]string, 0, len(ours))
	for dev := range ours {
		out = append(out, dev)
	}
	sort.Slice(out, func(i, j int) bool {
		if ours[out[i]] != ours[out[j]] {
			return ours[out[i]] > ours[out[j]]
		}
		return out[i] < out[j]
	})
	return out
}

// DetachUnder detaches every loop device Under(root). A device still in use
// is detached by the kernel at its last close (losetup -d sets autoclear).
func DetachUnder(root string) []error {
	var errs []error
	for _, dev := range Under(root) {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("losetup -d %s: %v: %s", dev, err, strings.TrimSpace(string(out))))
		}
	}
	return errs
}
