package iscsi

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
)

const (
	// rescanEvery repeats the targeted scan of a LUN that has not appeared.
	// The kernel's scan is synchronous, so this only matters when a scan
	// raced with a session (re)connect, or, in the iSCSI shim, whose scan
	// attribute is a plain file, when two attaches sharing the target lock
	// wrote it before the shim read it. A scan that finds nothing costs
	// one round trip to the target.
	rescanEvery = 1 * time.Second
	// pathGrace is how long Attach waits for the remaining paths once one
	// is there. A portal whose node does not report the LUN (selective LUN
	// map) never gets a path, and must not cost the whole DeviceTimeout.
	pathGrace = 5 * time.Second
)

// Attach logs in to the target, makes the kernel see this one LUN, checks
// that every device used is the LUN (serial) and returns the device to use:
// the multipath map when multipathd runs, else a single path. Attaching an
// attached LUN returns the same device without logging in or scanning.
func (c *Client) Attach(ctx context.Context, t Target) (*Device, error) {
	t, err := t.normalized()
	if err != nil {
		return nil, err
	}
	log := t.log(ctx)
	mp, err := c.multipathActive(ctx)
	if err != nil {
		return nil, err
	}
	if paths, err := c.locate(ctx, t); err == nil && complete(t, paths, mp) {
		// A repeated NodeStage: done if the device is complete. Anything
		// odd here is left to the full attach below, which reports it.
		if dev, err := c.device(t, paths); err == nil && (dev.Multipath || !mp) {
			log.WithField("device", dev.Path).Debug("iSCSI LUN already attached")
			return dev, nil
		}
	}

	paths, err := c.attachPaths(ctx, t, mp)
	if err != nil {
		return nil, err
	}
	var dev *Device
	if mp {
		dev, err = c.waitForMap(ctx, t, paths)
	} else {
		dev, err = c.device(t, paths)
	}
	if err != nil {
		return nil, err
	}
	if !dev.Multipath {
		log.WithField("device", dev.Path).Warn("multipathd is not running: using a single iSCSI path, without failover")
	}
	log.WithFields(logrus.Fields{"device": dev.Path, "paths": len(dev.Paths), "size": dev.Size}).Info("attached iSCSI LUN")
	return dev, nil
}

// complete reports whether paths are all an attach would produce: one path
// without multipath, a path through every portal with it. A retry after a
// crash between two portals' scans must go on to scan the second.
func complete(t Target, paths []pathDev, mp bool) bool {
	if !mp {
		return len(paths) > 0
	}
	for _, portal := range t.Portals {
		found := false
		for _, p := range paths {
			found = found || p.sess.Portal == portal
		}
		if !found {
			return false
		}
	}
	return true
}

// attachPaths holds the target lock from the first login until the LUN's
// path devices exist, so a concurrent Detach of another LUN of the target
// either sees them (and keeps the sessions) or runs before the login. The
// lock is shared while the sessions are there already: attaches of the
// target's LUNs (every LUN of an SVM is behind one target) then scan and
// wait side by side, and only a login or a logout (logoutIdle) excludes
// the others.
func (c *Client) attachPaths(ctx context.Context, t Target, mp bool) ([]pathDev, error) {
	unlock, err := c.lockTargetShared(ctx, t.IQN)
	if err != nil {
		return nil, err
	}
	if all, err := c.sessions(ctx); err != nil || needsLogin(targetSessions(all, t.IQN, t.Portals), t.Portals, mp) {
		// A shared lock cannot become exclusive in place: let go, and
		// ensureSessions decides again under the exclusive one.
		unlock()
		if unlock, err = c.lockTarget(ctx, t.IQN); err != nil {
			return nil, err
		}
	}
	defer unlock()
	sessions, err := c.ensureSessions(ctx, t, mp)
	if err != nil {
		return nil, err
	}
	if !mp {
		// Without dm-multipath on top, two SCSI devices of one LUN are two
		// independent caches of the same blocks: expose exactly one.
		sessions = []sessionDevs{pickSession(sessions, int(t.LUN))}
	}
	return c.scanAndVerify(ctx, t, sessions)
}

// pickSession prefers a session that already has a device at the LUN's
// address, so a retried single-path attach never adds a second path.
func pickSession(ss []sessionDevs, lun int) sessionDevs {
	for _, s := range ss {
		if devs, err := sessionDevices(s, lun); err == nil && len(devs) > 0 {
			return s
		}
	}
	return ss[0]
}

// ensureSessions logs in to the target's portals that have no session yet
// (all of them for multipath, one otherwise) and returns the sessions to
// t.Portals in portal order.
func (c *Client) ensureSessions(ctx context.Context, t Target, mp bool) ([]sessionDevs, error) {
	log := t.log(ctx)
	all, err := c.sessions(ctx)
	if err != nil {
		return nil, err
	}
	have := targetSessions(all, t.IQN, t.Portals)
	var errs []error
	if mp || len(have) == 0 {
		loggedIn := false
		for _, p := range t.Portals {
			if hasPortal(have, p) {
				continue
			}
			if err := c.login(ctx, t, p, mp); err != nil {
				if ctx.Err() != nil {
					return nil, err
				}
				log.WithField("portal", p).WithError(err).Warn("iSCSI login failed")
				errs = append(errs, err)
				continue
			}
			loggedIn = true
			if !mp {
				break
			}
		}
		if loggedIn {
			if all, err = c.sessions(ctx); err != nil {
				return nil, err
			}
			have = targetSessions(all, t.IQN, t.Portals)
		}
	}
	var out []sessionDevs
	for _, s := range have {
		sd, err := c.sessionSysfs(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, sd)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no usable iSCSI session to %s: %w", t.IQN, errors.Join(errs...))
	}
	if len(errs) > 0 {
		log.WithField("sessions", len(out)).Warn("continuing with fewer iSCSI sessions than portals")
	}
	return out, nil
}

// needsLogin tells whether ensureSessions would log in: with multipath
// while a portal has no session, without it while none has.
func needsLogin(have []session, portals []string, mp bool) bool {
	if !mp {
		return len(have) == 0
	}
	for _, p := range portals {
		if !hasPortal(have, p) {
			return true
		}
	}
	return false
}

func hasPortal(ss []session, portal string) bool {
	for _, s := range ss {
		if s.Portal == portal {
			return true
		}
	}
	return false
}

// pathDiscovery is the search for the LUN's path on one session: scan,
// serial check and at most one removal of a stale device.
type pathDiscovery struct {
	sd       sessionDevs
	lastScan time.Time
	removed  int    // stale devices removed so far
	removing string // sysfs dir of the device being removed
	found    *pathDev
	err      error // final
	why      string
}

// scanAndVerify scans the LUN on each session and waits for its verified
// paths: all of them, or those that appeared within pathGrace of the first.
func (c *Client) scanAndVerify(ctx context.Context, t Target, sessions []sessionDevs) ([]pathDev, error) {
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	discoveries := make([]*pathDiscovery, len(sessions))
	for i, sd := range sessions {
		discoveries[i] = &pathDiscovery{sd: sd}
	}
	var first time.Time
	var bo backoff
	for {
		pending := 0
		for _, d := range discoveries {
			if d.found == nil && d.err == nil {
				c.discoverPath(ctx, t, d)
			}
			switch {
			case d.err != nil:
				return nil, d.err
			case d.found == nil:
				pending++
			case first.IsZero():
				// The other paths usually follow within moments: look
				// again soon.
				first, bo = time.Now(), backoff{}
			}
		}
		if pending == 0 || (!first.IsZero() && time.Since(first) > pathGrace) {
			break
		}
		if err := sleep(wctx, bo.next()); err != nil {
			if ctx.Err() != nil || first.IsZero() {
				why := ""
				for _, d := range discoveries {
					if d.why != "" {
						why = ": " + d.why
					}
				}
				return nil, fmt.Errorf("LUN %d of %s did not appear within %s%s: %w", t.LUN, t.IQN, waited(start), why, waitEnded(ctx))
			}
			break
		}
	}
	var paths []pathDev
	for _, d := range discoveries {
		if d.found != nil {
			paths = append(paths, *d.found)
		} else {
			t.log(ctx).WithField("portal", d.sd.Portal).Warn("LUN did not appear on this iSCSI session; continuing without that path")
		}
	}
	return paths, nil
}

// discoverPath advances one session's path discovery as far as sysfs
// allows right now.
func (c *Client) discoverPath(ctx context.Context, t Target, d *pathDiscovery) {
	lun := int(t.LUN)
	devs, err := sessionDevices(d.sd, lun)
	if err != nil {
		d.why = err.Error()
		return
	}
	if d.removing != "" {
		for _, dev := range devs {
			if dev.dir == d.removing {
				d.why = "waiting for the removal of a stale device"
				return
			}
		}
		d.removing = ""
	}
	if len(devs) == 0 {
		if time.Since(d.lastScan) >= rescanEvery {
			// "C T L": exactly this LUN on this session's single target.
			scan := fmt.Sprintf("0 %d %d", d.sd.targetID, lun)
			if err := c.writeAttr(c.scanFile(d.sd), scan); err != nil {
				d.err = fmt.Errorf("scan LUN %d on session %d: %w", lun, d.sd.ID, err)
				return
			}
			d.lastScan = time.Now()
		}
		d.why = "no SCSI device after the scan"
		return
	}
	dev := devs[0]
	if dev.name == "" {
		d.why = "SCSI device " + dev.addr.String() + " has no block device yet"
		return
	}
	serial, err := c.devSerial(dev)
	if err != nil {
		d.why = err.Error()
		return
	}
	if serial != t.Serial {
		c.removeStale(ctx, t, d, dev, serial)
		return
	}
	node, err := c.devNode(dev.name)
	if err != nil {
		d.why = "device node: " + err.Error()
		return
	}
	d.found = &pathDev{sess: d.sd, dev: dev, node: node}
}

// removeStale handles a device at the LUN's address with another serial:
// the kernel still has another LUN there (unmapped and replaced on the
// array since it was scanned), or the array maps something else there.
// Remove it and scan once more; never touch it while something uses it.
func (c *Client) removeStale(ctx context.Context, t Target, d *pathDiscovery, dev scsiDevice, serial string) {
	serialMismatchesTotal.Inc()
	log := t.log(ctx).WithFields(logrus.Fields{"device": dev.name, "address": dev.addr.String(), "found": serial})
	busy, err := c.inUse(dev.name)
	if err != nil {
		d.err = err
		return
	}
	if busy {
		d.err = fmt.Errorf("%w: %s at LUN %d of %s is LUN %q and in use; not removing it", ErrSerialMismatch, dev.name, t.LUN, t.IQN, serial)
		return
	}
	log.Warn("removing stale SCSI device at the LUN's address")
	// No flush: its dirty buffers, if any, belong to another LUN.
	if err := c.writeAttr(filepath.Join(dev.dir, "delete"), "1"); err != nil {
		d.err = fmt.Errorf("remove stale device %s: %w", dev.name, err)
		return
	}
	d.removed++
	if d.removed > 1 {
		d.err = fmt.Errorf("%w: LUN %d of %s is %q after a rescan, want %q", ErrSerialMismatch, t.LUN, t.IQN, serial, t.Serial)
		return
	}
	d.removing, d.lastScan = dev.dir, time.Time{}
	d.why = "rescanning after removing a stale device"
}

// waitForMap waits for multipathd to build the LUN's map over its paths and
// checks it.
func (c *Client) waitForMap(ctx context.Context, t Target, paths []pathDev) (*Device, error) {
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var seen time.Time
	var last dmMap
	var bo backoff
	for {
		maps, err := c.pathMaps(paths)
		if err != nil {
			return nil, err
		}
		if len(maps) > 1 {
			return nil, fmt.Errorf("%w: paths of LUN %q are held by %d multipath maps", ErrSerialMismatch, t.Serial, len(maps))
		}
		if len(maps) == 1 {
			slaves, err := c.verifyMap(maps[0], t.Serial)
			if err != nil {
				return nil, err
			}
			if seen.IsZero() {
				seen, bo = time.Now(), backoff{}
			}
			last = maps[0]
			if len(slaves) >= len(paths) || time.Since(seen) > pathGrace {
				return c.finishMap(wctx, t, maps[0], paths)
			}
		}
		if sleep(wctx, bo.next()) != nil {
			if !seen.IsZero() && ctx.Err() == nil {
				return c.finishMap(ctx, t, last, paths)
			}
			if late := c.udevPending(paths); len(late) > 0 {
				return nil, fmt.Errorf("multipathd built no map for LUN %q within %s: udev has not processed its path devices %s yet, and multipathd adds a path only once udev has (the host's udev queue is behind; udevadm monitor shows it): %w", t.Serial, waited(start), strings.Join(late, ", "), waitEnded(ctx))
			}
			return nil, fmt.Errorf("multipathd built no map for LUN %q within %s (it needs find_multipaths \"no\" or the WWID whitelisted): %w", t.Serial, waited(start), waitEnded(ctx))
		}
	}
}

// finishMap grows a map that is smaller than its paths (the LUN grew while
// the map was down, as 26.06 Trident also checks) and describes the device.
func (c *Client) finishMap(ctx context.Context, t Target, m dmMap, paths []pathDev) (*Device, error) {
	var pathSize int64
	for _, p := range paths {
		if s, err := c.blockSize(p.dev.name); err == nil && s > pathSize {
			pathSize = s
		}
	}
	if size, err := c.blockSize(m.name); err == nil && size < pathSize {
		if _, err := c.resizeMap(ctx, m, pathSize); err != nil {
			return nil, err
		}
	}
	return c.device(t, paths)
}
