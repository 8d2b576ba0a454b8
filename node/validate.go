package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	mount "k8s.io/mount-utils"

	"github.com/ontap-csi/ontap-csi/node/tracking"
)

// maxPathLen is the longest path accepted from a request (PATH_MAX). The spec
// asks plugins to accept at least 128 bytes; kubelet's paths are ~200.
const maxPathLen = 4096

// checkVolumeID vets a volume id before it names a lock, a tracking file or
// anything else.
func checkVolumeID(id string) error {
	switch {
	case id == "":
		return invalidArgument("volume id missing")
	case len(id) > 128:
		return invalidArgument("volume id is %d bytes, more than the 128 the CSI spec allows", len(id))
	case !tracking.ValidVolumeID(id):
		return invalidArgument("volume id %q has characters outside [A-Za-z0-9._-] or starts with '.' or '-'", id)
	}
	return nil
}

// paths confines the paths of requests to the kubelet directory: kubelet only
// ever asks for staging and target paths below it, so anything else is a bug
// or an attack.
type paths struct {
	base string // cleaned --kubelet-dir
	// isMountPoint tells a path that may have something mounted on it,
	// which is then never stat'ed: a stat of an NFS mount point whose
	// server is gone blocks forever, and unpublish is exactly what must
	// still work then. It may answer "mounted" for any mount root
	// (mounter.mountedHere: a bounded statx that does not ask an NFS
	// server, without parsing the mount table). Nil: nothing is mounted.
	isMountPoint func(string) (bool, error)
}

// confine checks p and returns it cleaned, with the symlinks of its existing
// components resolved so the result is what mount(8) would act on. The
// result must still lie strictly below the (resolved) kubelet directory.
// Checks run only on the path string, the mount table and lstat/readlink,
// so a rejected path leaves no trace.
func (c paths) confine(p string) (string, error) {
	switch {
	case len(p) > maxPathLen:
		return "", fmt.Errorf("path is %d bytes, more than %d", len(p), maxPathLen)
	case strings.ContainsAny(p, "\x00\n\r"):
		return "", errors.New("path contains a NUL or newline")
	case !filepath.IsAbs(p):
		return "", fmt.Errorf("path %q is not absolute", p)
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return "", fmt.Errorf("path %q has a '..' element", p)
		}
	}
	clean := filepath.Clean(p)
	if !strictlyBelow(clean, c.base) {
		return "", fmt.Errorf("path %q is not below the kubelet directory %s", p, c.base)
	}
	resolved, err := c.resolve(clean)
	if err != nil {
		return "", fmt.Errorf("path %q: %w", p, err)
	}
	realBase, err := resolveExisting(c.base)
	if err != nil {
		return "", fmt.Errorf("kubelet directory %s: %w", c.base, err)
	}
	if !strictlyBelow(resolved, realBase) {
		return "", fmt.Errorf("path %q resolves to %s, outside the kubelet directory %s", p, resolved, realBase)
	}
	return resolved, nil
}

func strictlyBelow(p, base string) bool {
	if base == "/" {
		return p != "/"
	}
	return strings.HasPrefix(p, base+"/")
}

// resolve resolves the symlinks of p: those of its parents, and p itself
// when it is a symlink. A mount point is not a symlink (mount follows them)
// and is not looked at; neither is a broken mount (ENOTCONN, ESTALE, ...),
// which unpublish must be able to clean up. A dangling symlink is refused:
// mount would follow it wherever it points.
func (c paths) resolve(p string) (string, error) {
	parent, err := resolveExisting(filepath.Dir(p))
	if err != nil {
		return "", err
	}
	full := filepath.Join(parent, filepath.Base(p))
	if c.isMountPoint != nil {
		mounted, err := c.isMountPoint(full)
		if err != nil || mounted {
			return full, err
		}
	}
	st, err := os.Lstat(full)
	switch {
	case errors.Is(err, fs.ErrNotExist), mount.IsCorruptedMnt(err):
		return full, nil
	case err != nil:
		return "", err
	case st.Mode()&fs.ModeSymlink == 0:
		return full, nil
	}
	r, err := filepath.EvalSymlinks(full)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s is a dangling symlink", full)
	}
	return r, err
}

// resolveExisting resolves symlinks in the longest existing prefix of p and
// appends the rest, refusing a dangling symlink. It is for directories kubelet
// made (the parents of targets and staging paths, the kubelet dir), where
// nothing is mounted.
func resolveExisting(p string) (string, error) {
	dir, rest := p, ""
	for {
		r, err := filepath.EvalSymlinks(dir)
		if err == nil {
			out := filepath.Join(r, rest)
			if rest != "" {
				if st, err := os.Lstat(out); err == nil && st.Mode()&fs.ModeSymlink != 0 {
					return "", fmt.Errorf("%s is a dangling symlink", out)
				}
			}
			return out, nil
		}
		if !errors.Is(err, fs.ErrNotExist) && !mount.IsCorruptedMnt(err) {
			return "", err
		}
		if dir == "/" || dir == "." {
			return "", err
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = filepath.Dir(dir)
	}
}

// Mount options come from the publish context (Trident's backend
// mountOptions) and from the capability (the PV's mountOptions). Each item
// is checked on its own and they are joined into one -o argument, so an
// option can only ever be an option: no second source, no second flag.
var (
	optionPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.:=/+@%-]*$`)

	// deniedOptions change what is mounted or where, or hand control to
	// another program, rather than tune the mount.
	deniedOptions = map[string]bool{
		"bind": true, "rbind": true, "remount": true, "move": true,
		"shared": true, "rshared": true, "slave": true, "rslave": true,
		"private": true, "rprivate": true, "unbindable": true, "runbindable": true,
		"loop": true, "offset": true, "sizelimit": true, "encryption": true,
		"helper": true, "fd": true, "source": true, "target": true,
		// NFS: addr/mountaddr override the server named in the source.
		"addr": true, "mountaddr": true,
		// fstab-only options that change who may mount or unmount.
		"user": true, "users": true, "owner": true, "group": true,
	}
)

const (
	maxOptionLen     = 256
	maxOptionsLength = 4096
)

// checkOption vets one mount option.
func checkOption(o string) error {
	if len(o) > maxOptionLen {
		return fmt.Errorf("mount option of %d bytes is longer than %d", len(o), maxOptionLen)
	}
	if !optionPattern.MatchString(o) {
		return fmt.Errorf("mount option %q has characters outside [A-Za-z0-9_.:=/+@%%-] or starts with a symbol", o)
	}
	key := strings.ToLower(o)
	if k, _, ok := strings.Cut(key, "="); ok {
		key = k
	}
	switch {
	case deniedOptions[key]:
		return fmt.Errorf("mount option %q is not allowed", o)
	case strings.HasPrefix(key, "x-"), strings.HasPrefix(key, "make-"):
		return fmt.Errorf("mount option %q is not allowed", o)
	}
	return nil
}

// parseOptionList splits a Trident mountOptions string ("-o a,b" or "a,b")
// into checked options.
func parseOptionList(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "-o"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
		s = strings.TrimSpace(rest)
	}
	return splitOptions([]string{s})
}

// splitOptions checks a list of options whose items may themselves be comma
// lists (PV mountOptions often are), and drops empty items and repeats.
func splitOptions(items []string) ([]string, error) {
	var out []string
	total := 0
	seen := map[string]bool{}
	for _, item := range items {
		total += len(item)
		if total > maxOptionsLength {
			return nil, fmt.Errorf("mount options are longer than %d bytes", maxOptionsLength)
		}
		for _, o := range strings.Split(item, ",") {
			o = strings.TrimSpace(o)
			if o == "" || seen[o] {
				continue
			}
			if err := checkOption(o); err != nil {
				return nil, err
			}
			seen[o] = true
			out = append(out, o)
		}
	}
	return out, nil
}

// Filesystems ontap-csi formats and mounts on iSCSI LUNs.
const (
	fsExt3 = "ext3"
	fsExt4 = "ext4"
	fsXFS  = "xfs"
	fsRaw  = "raw" // Trident's fstype for raw block volumes
)

// volumeCap is a checked volume capability.
type volumeCap struct {
	block   bool
	fsType  string   // as requested; "" = let the publish context decide
	flags   []string // checked mount flags
	mode    csi.VolumeCapability_AccessMode_Mode
	present bool
}

// checkAccessMode vets an access mode: one of the CSI enum's modes. The
// node advertises SINGLE_NODE_MULTI_WRITER, so the two newer single-node
// modes are valid here (CSI spec, NodeServiceCapability).
func checkAccessMode(m csi.VolumeCapability_AccessMode_Mode) error {
	switch m {
	case csi.VolumeCapability_AccessMode_UNKNOWN:
		return invalidArgument("volume_capability.access_mode.mode is missing (UNKNOWN)")
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
		csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY, csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER,
		csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER, csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER:
		return nil
	}
	return invalidArgument("volume_capability.access_mode.mode %d is not a CSI access mode", m)
}

// checkCapability vets a stage or publish capability.
func checkCapability(vc *csi.VolumeCapability) (volumeCap, error) {
	if vc == nil {
		return volumeCap{}, invalidArgument("volume capability missing")
	}
	c := volumeCap{present: true, mode: vc.GetAccessMode().GetMode()}
	if err := checkAccessMode(c.mode); err != nil {
		return c, err
	}
	switch {
	case vc.GetBlock() != nil && vc.GetMount() != nil:
		return c, invalidArgument("mixed block and mount capabilities")
	case vc.GetBlock() != nil:
		c.block = true
	case vc.GetMount() != nil:
		m := vc.GetMount()
		c.fsType = strings.ToLower(m.GetFsType())
		if len(c.fsType) > 32 || strings.ContainsAny(c.fsType, "\x00\n,/ ") {
			return c, invalidArgument("file system type %q is malformed", m.GetFsType())
		}
		flags, err := splitOptions(m.GetMountFlags())
		if err != nil {
			return c, invalidArgument("mount flags: %v", err)
		}
		c.flags = flags
	default:
		return c, invalidArgument("mount or block capability required")
	}
	return c, nil
}

// readerOnly reports access modes that allow no writer: such a volume is
// published read-only whatever the request's readonly flag says.
func (c volumeCap) readerOnly() bool {
	return c.mode == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY ||
		c.mode == csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
}

// multiNodeWriter reports access modes that let several nodes write.
func (c volumeCap) multiNodeWriter() bool {
	return c.mode == csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER ||
		c.mode == csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER
}
