package node

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/node/hostexec"
)

// signatures returns the file system type and partition table type blkid
// finds on dev, "" for none. It reads the device itself (-p), not blkid's
// cache, which may predate the LUN.
func (s *Service) signatures(ctx context.Context, dev string) (fsType, ptType string, err error) {
	out, err := s.exec.Run(ctx, "blkid", "-p", "-s", "TYPE", "-s", "PTTYPE", "-o", "export", dev)
	if hostexec.ExitCode(err) == 2 {
		return "", "", nil // blkid: nothing identified
	}
	if err != nil {
		return "", "", fmt.Errorf("identify %s: %w", dev, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok {
			continue
		}
		switch k {
		case "TYPE":
			fsType = v
		case "PTTYPE":
			ptType = v
		}
	}
	return fsType, ptType, nil
}

// emptyCheckBytes is how much of each end of a device must read as zeros for
// the device to count as provably empty.
const emptyCheckBytes = 1 << 20

// provablyEmpty reports whether dev's first and last MiB are all zeros.
//
// The rule for formatting is: blkid finds no file system, RAID member, LVM
// or LUKS signature and no partition table, AND these two regions are zero.
// Every signature blkid knows sits in them (superblocks, MBR/GPT and the
// backup GPT at the end, LVM labels, ZFS labels at both ends), so a device
// with data blkid does not recognise, or a signature it missed, is still not
// formatted. A fresh ONTAP LUN reads as zeros. A device whose mkfs was
// interrupted would be refused too; the stage's record lets it be formatted
// again instead (ensureFilesystem's resume).
func provablyEmpty(dev string) (bool, error) {
	f, err := os.Open(dev)
	if err != nil {
		return false, err
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return false, err
	}
	buf := make([]byte, 64<<10)
	check := func(off, n int64) (bool, error) {
		for n > 0 {
			chunk := buf[:min(int64(len(buf)), n)]
			if _, err := f.ReadAt(chunk, off); err != nil {
				return false, err
			}
			for _, b := range chunk {
				if b != 0 {
					return false, nil
				}
			}
			off += int64(len(chunk))
			n -= int64(len(chunk))
		}
		return true, nil
	}
	head := min(size, emptyCheckBytes)
	if ok, err := check(0, head); !ok || err != nil {
		return false, err
	}
	tailStart := max(head, size-emptyCheckBytes)
	return check(tailStart, size-tailStart)
}

// ensureFilesystem makes sure dev carries fsType: it is used as it is when it
// does, formatted when it is provably empty, and refused otherwise. With
// resume, the stage's record says that this node began formatting this LUN
// (provably empty then) and did not finish: whatever is on it is what that
// mkfs left, and it is formatted again. beforeFormat records the format
// before mkfs starts.
func (s *Service) ensureFilesystem(ctx context.Context, dev, fsType string, resume bool, beforeFormat func() error) error {
	log := logrus.WithContext(ctx).WithFields(logrus.Fields{"device": dev, "fsType": fsType})
	if resume {
		log.Warn("a format of this LUN by this node was interrupted; formatting it again")
	} else {
		existing, pt, err := s.signatures(ctx, dev)
		if err != nil {
			return internal("%v", err)
		}
		switch {
		case existing == fsType:
			return s.repair(ctx, dev, fsType)
		case existing != "":
			return failedPrecondition("device %s is already formatted with %s, not %s; refusing to reformat it", dev, existing, fsType)
		case pt != "":
			return failedPrecondition("device %s has a %s partition table; refusing to format it", dev, pt)
		}
		empty, err := provablyEmpty(dev)
		if err != nil {
			return internal("read device %s: %v", dev, err)
		}
		if !empty {
			return failedPrecondition("device %s has no file system blkid recognises but is not empty (non-zero data in its first or last MiB); refusing to format it", dev)
		}
		log.Info("formatting empty device")
	}
	release, err := s.formats.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	if err := beforeFormat(); err != nil {
		return err
	}
	crashpoint("NodeStageVolume/formatting")
	var args []string
	switch fsType {
	case fsXFS:
		args = []string{"-f", dev}
	case fsExt3, fsExt4:
		args = []string{"-F", dev}
	default:
		return invalidArgument("unsupported file system type %q", fsType)
	}
	if _, err := s.exec.Run(ctx, "mkfs."+fsType, args...); err != nil {
		return internal("format %s as %s: %v", dev, fsType, err)
	}
	return nil
}

// repair checks an ext file system before it is mounted, as mount-utils
// and Trident 26.06 do; it catches what a crash or a lost path left behind
// before the kernel trips over it. XFS replays its log at mount instead.
func (s *Service) repair(ctx context.Context, dev, fsType string) error {
	if fsType != fsExt3 && fsType != fsExt4 {
		return nil
	}
	if mounted, err := s.mounter.deviceMounted(dev); err != nil || mounted {
		// Checking a mounted file system corrupts it; a Trident-staged
		// volume may be mounted on its targets.
		return err
	}
	_, err := s.exec.Run(ctx, "e2fsck", "-p", dev)
	switch code := hostexec.ExitCode(err); {
	case err == nil:
		return nil
	case code == 1 || code == 2:
		logrus.WithContext(ctx).WithField("device", dev).Warn("e2fsck corrected file system errors")
		return nil
	case code == 4:
		return failedPrecondition("file system on %s has errors e2fsck -p cannot correct: %v", dev, err)
	default:
		return internal("check file system on %s: %v", dev, err)
	}
}

// growFilesystem grows the file system on dev, mounted at mountPoint, to
// the device's size.
func (s *Service) growFilesystem(ctx context.Context, dev, mountPoint, fsType string) error {
	var err error
	switch fsType {
	case fsExt3, fsExt4:
		_, err = s.exec.Run(ctx, "resize2fs", dev)
	case fsXFS:
		// xfs_growfs works on a mount point, not a device.
		_, err = s.exec.Run(ctx, "xfs_growfs", mountPoint)
	default:
		return internal("cannot grow a %q file system", fsType)
	}
	if err != nil {
		return internal("grow %s file system on %s: %v", fsType, dev, err)
	}
	return nil
}
