package iscsi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/sirupsen/logrus"
)

// pathDev is one verified path of a LUN: a SCSI device whose serial is the
// LUN's.
type pathDev struct {
	sess sessionDevs
	dev  scsiDevice
	node string // resolved device node; "" while udev has not created it
}

// locate finds the verified paths of t on every session to its target,
// whatever the portal: a volume staged with another portal list (an older
// publish context, a LIF since moved) must still be found and cleaned up.
// Devices at t's address with another serial belong to another LUN and are
// left out.
func (c *Client) locate(ctx context.Context, t Target) ([]pathDev, error) {
	all, err := c.sessions(ctx)
	if err != nil {
		return nil, err
	}
	var paths []pathDev
	for _, s := range orderByPortal(targetSessions(all, t.IQN, nil), t.Portals) {
		sd, err := c.sessionSysfs(s)
		if err != nil {
			// Listed by iscsiadm but gone from sysfs: logging out right now.
			t.log(ctx).WithError(err).Debug("skipping iSCSI session without sysfs entry")
			continue
		}
		devs, err := sessionDevices(sd, int(t.LUN))
		if errors.Is(err, os.ErrNotExist) {
			continue // logged out meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("session %d: %w", s.ID, err)
		}
		for _, d := range devs {
			if d.name == "" {
				continue
			}
			serial, err := c.devSerial(d)
			if err != nil || serial != t.Serial {
				// Unknown identity is treated like a foreign one: never
				// used, never removed.
				t.log(ctx).WithFields(logrus.Fields{"device": d.name, "found": serial}).Debug("device at the LUN's address is not this LUN")
				continue
			}
			node, _ := c.devNode(d.name)
			paths = append(paths, pathDev{sess: sd, dev: d, node: node})
		}
	}
	return paths, nil
}

// orderByPortal puts sessions to the given portals first, in their order,
// so the single path chosen is stable across calls.
func orderByPortal(ss []session, portals []string) []session {
	out := make([]session, 0, len(ss))
	for _, p := range portals {
		for _, s := range ss {
			if s.Portal == p {
				out = append(out, s)
			}
		}
	}
	for _, s := range ss {
		known := false
		for _, p := range portals {
			known = known || s.Portal == p
		}
		if !known {
			out = append(out, s)
		}
	}
	return out
}

// Find returns the attached device of t, nil when it is not attached: an
// answer, not a failure, whose meaning is the caller's (a volume to publish
// that is not staged, an unhealthy volume, a stage to do).
func (c *Client) Find(ctx context.Context, t Target) (*Device, error) {
	t, err := t.normalized()
	if err != nil {
		return nil, err
	}
	paths, err := c.locate(ctx, t)
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, nil
	}
	return c.device(t, paths)
}

// device describes the LUN whose verified paths are given: its multipath
// map when one holds the paths (whether or not multipathd runs now), else
// the first path.
func (c *Client) device(t Target, paths []pathDev) (*Device, error) {
	dev := &Device{}
	for _, p := range paths {
		if p.node != "" {
			dev.Paths = append(dev.Paths, p.node)
		}
	}
	if len(dev.Paths) == 0 {
		return nil, fmt.Errorf("LUN %d of %s: no device node for its paths in %s yet", t.LUN, t.IQN, c.devDir)
	}
	maps, err := c.pathMaps(paths)
	if err != nil {
		return nil, err
	}
	name := ""
	switch len(maps) {
	case 0:
		dev.Path = dev.Paths[0]
		for _, p := range paths {
			if p.node != "" {
				name = p.dev.name
				break
			}
		}
	case 1:
		if _, err := c.verifyMap(maps[0], t.Serial); err != nil {
			return nil, err
		}
		node, err := c.devNode(maps[0].name)
		if err != nil {
			return nil, fmt.Errorf("multipath map %s: %w", maps[0].mapName, err)
		}
		dev.Path, dev.Multipath, name = node, true, maps[0].name
	default:
		return nil, fmt.Errorf("%w: paths of LUN %q are held by %d multipath maps", ErrSerialMismatch, t.Serial, len(maps))
	}
	if dev.Size, err = c.blockSize(name); err != nil {
		return nil, fmt.Errorf("size of %s: %w", dev.Path, err)
	}
	return dev, nil
}

// waitGone waits until a sysfs entry disappears.
func (c *Client) waitGone(ctx context.Context, path string) error {
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var bo backoff
	for {
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if sleep(wctx, bo.next()) != nil {
			return fmt.Errorf("%s still present after %s: %w", path, waited(start), waitEnded(ctx))
		}
	}
}

// waitSize waits until a block device has at least want bytes (want 0:
// read once) and returns its size.
func (c *Client) waitSize(ctx context.Context, name string, want int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var bo backoff
	for start := time.Now(); ; {
		size, err := c.blockSize(name)
		if err == nil && size >= want {
			return size, nil
		}
		if serr := sleep(ctx, bo.next()); serr != nil {
			if err == nil {
				err = fmt.Errorf("size %d, want at least %d", size, want)
			}
			return 0, fmt.Errorf("%s after %s: %w", name, time.Since(start).Round(time.Millisecond), err)
		}
	}
}
