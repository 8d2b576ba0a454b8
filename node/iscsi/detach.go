package iscsi

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sirupsen/logrus"
)

// Detach removes the LUN from this host: it flushes and removes its
// multipath map, flushes and deletes each of its SCSI paths, and logs out of
// every session to the target that no longer carries any LUN. Only devices
// whose serial (or map WWID) is the LUN's are touched. The caller unmounts
// first: a device still mounted is ErrDeviceInUse. Detaching a LUN that is
// not attached succeeds, and still logs out of idle sessions, so an unstage
// after a failed stage cleans up what the stage left.
func (c *Client) Detach(ctx context.Context, t Target) error {
	var l lunInDetach
	for attempt := 1; ; attempt++ {
		var err error
		if l, err = c.releaseMaps(ctx, t); err != nil {
			return err
		}
		if l.busy == "" {
			break
		}
		// multipathd may build the LUN's map at any moment after the
		// login: a stage that gave up waiting for it, then this unstage,
		// meet it late (TestMultipathMapLateOrNever "never", in the VM:
		// the map claimed the paths between the listing of maps and this
		// check). Such a map is the LUN's, found by its paths' serial on
		// the next look, and flushed with the others.
		if attempt >= lateMapAttempts {
			return fmt.Errorf("%w: %s (LUN %d of %s) is still open or mounted", ErrDeviceInUse, l.busy, l.t.LUN, l.t.IQN)
		}
		l.t.log(ctx).WithField("device", l.busy).Debug("a path of the LUN is in use after its maps were flushed; looking for a map that came late")
		if err := sleep(ctx, refusedRetryDelay); err != nil {
			return err
		}
	}
	t, paths, maps := l.t, l.paths, l.maps
	log := t.log(ctx)
	for _, p := range paths {
		if p.node != "" && !l.underMap[p.dev.name] {
			if _, err := c.run(ctx, "blockdev", "--flushbufs", p.node); err != nil {
				log.WithField("device", p.node).WithError(toolErr(err)).Warn("flushing buffers before removing the path failed")
			}
		}
		if err := c.writeAttr(filepath.Join(p.dev.dir, "delete"), "1"); err != nil {
			if c.waitGone(ctx, p.dev.dir) == nil {
				continue // removed meanwhile
			}
			return fmt.Errorf("remove SCSI device %s: %w", p.dev.name, err)
		}
	}
	for _, p := range paths {
		if err := c.waitGone(ctx, p.dev.dir); err != nil {
			return fmt.Errorf("remove SCSI device %s: %w", p.dev.name, err)
		}
	}
	if len(paths) > 0 || len(maps) > 0 {
		log.WithFields(logrus.Fields{"paths": len(paths), "maps": len(maps)}).Info("detached iSCSI LUN")
	}
	return c.logoutIdle(ctx, t.IQN)
}

// lunDevices validates t and finds the LUN's paths and multipath maps.
func (c *Client) lunDevices(ctx context.Context, t Target) (Target, []pathDev, []dmMap, error) {
	t, err := t.normalized()
	if err != nil {
		return t, nil, nil, err
	}
	paths, err := c.locate(ctx, t)
	if err != nil {
		return t, nil, nil, err
	}
	maps, err := c.lunMaps(t, paths)
	return t, paths, maps, err
}

// lunMaps are the LUN's multipath maps: those holding its paths, and
// those found by serial or WWID (mapsBySerial).
func (c *Client) lunMaps(t Target, paths []pathDev) ([]dmMap, error) {
	maps, err := c.pathMaps(paths)
	if err != nil {
		return nil, err
	}
	ghosts, err := c.mapsBySerial(t.Serial, paths)
	if err != nil {
		return nil, err
	}
	for _, g := range ghosts {
		if !containsMap(maps, g) {
			maps = append(maps, g)
		}
	}
	return maps, nil
}

func containsMap(ms []dmMap, m dmMap) bool {
	for _, x := range ms {
		if x.name == m.name {
			return true
		}
	}
	return false
}

// logoutIdle logs out of each portal of the target none of whose sessions
// carries a SCSI device, and deletes the target's node records that have no
// session (also those a crash left between logout and delete, or between
// record creation and login). Under the target lock no Attach is between
// its login and the appearance of its device, so "no device" means "no LUN
// of this target in use here" (scan=manual: nothing appears unasked).
func (c *Client) logoutIdle(ctx context.Context, iqn string) error {
	unlock, err := c.lockTarget(ctx, iqn)
	if err != nil {
		return err
	}
	defer unlock()
	all, err := c.sessions(ctx)
	if err != nil {
		return err
	}
	busy := map[string]bool{}
	var portals []string
	for _, s := range targetSessions(all, iqn, nil) {
		if !containsString(portals, s.Portal) {
			portals = append(portals, s.Portal)
		}
		sd, err := c.sessionSysfs(s)
		if err != nil {
			// Cannot see its devices: keep it, never guess "unused".
			busy[s.Portal] = true
			continue
		}
		devs, err := sessionDevices(sd, -1)
		if err != nil || len(devs) > 0 {
			busy[s.Portal] = true
		}
	}
	for _, p := range portals {
		if busy[p] {
			logrus.WithContext(ctx).WithFields(logrus.Fields{"target": iqn, "portal": p}).Debug("iSCSI session still carries LUNs; staying logged in")
			continue
		}
		if err := c.logout(ctx, iqn, p); err != nil {
			return err
		}
	}
	if len(busy) > 0 {
		// The target is still in use here: its records are needed, and a
		// stray one (a crash between record and login) goes with the
		// detach of the target's last LUN. Listing them would cost a
		// process on every detach but the last.
		return nil
	}
	records, err := c.nodeRecords(ctx)
	if err != nil {
		return err
	}
	deleted := map[string]bool{}
	for _, r := range records {
		if strings.EqualFold(r.Target, iqn) && !busy[r.Portal] && !deleted[r.Portal] {
			deleted[r.Portal] = true
			if err := c.deleteRecord(ctx, iqn, r.Portal); err != nil {
				return err
			}
		}
	}
	return nil
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// lateMapAttempts bounds Detach's looks for a multipath map that claimed
// the LUN's paths after it listed the maps.
const lateMapAttempts = 3

// lunInDetach is what a detach found of the LUN: its paths and maps,
// which paths were under a map, and a path still in use after the maps
// were flushed (held by a map that came late, or by a mount on the path).
type lunInDetach struct {
	t        Target
	paths    []pathDev
	maps     []dmMap
	underMap map[string]bool
	busy     string
}

// releaseMaps lists the LUN's paths and maps, stops dead maps queueing and
// flushes the maps.
func (c *Client) releaseMaps(ctx context.Context, t Target) (lunInDetach, error) {
	// Maps first (unstage order: unmount, flush map, remove paths, log
	// out): a path cannot be deleted from under a live map cleanly. Maps
	// found by serial and WWID as well, so one left without paths goes too.
	t, paths, maps, err := c.lunDevices(ctx, t)
	l := lunInDetach{t: t, paths: paths, maps: maps, underMap: map[string]bool{}}
	if err != nil {
		return l, err
	}
	// multipathd is not asked about the maps' paths: the caller's unmount,
	// the only step that writes to them, ran under the watch of
	// ReleaseDeadMapsDuring; a one-shot look proves nothing anyway (a
	// checker may reinstate an unmapped LUN's path, docs/vm.md defect 9);
	// and multipath -f turns queueing off itself before it removes a map
	// (docs/design/architecture.md §7.3). Asking cost a process per
	// unstage (issue 18).
	// A path under a map was written through the map only, and the map's
	// writes went out at its last close (flushMap): flushing the path has
	// nothing to write.
	for _, p := range paths {
		if hs, err := c.holders(p.dev.name); err == nil && len(hs) > 0 {
			l.underMap[p.dev.name] = true
		}
	}
	for _, m := range maps {
		if err := c.flushMap(ctx, m); err != nil {
			return l, err
		}
	}
	for _, p := range paths {
		inUse, err := c.inUse(p.dev.name)
		if err != nil {
			return l, err
		}
		if inUse {
			l.busy = p.dev.name
			break
		}
	}
	return l, nil
}
