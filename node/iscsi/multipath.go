package iscsi

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
)

// dmMap is a dm-multipath map as sysfs shows it.
type dmMap struct {
	name    string // kernel name: dm-3
	mapName string // dm/name: the WWID, or mpathN with user_friendly_names
	uuid    string // dm/uuid: "mpath-" + WWID
}

// multipathdTTL is how long an answer of `multipathd show daemon` is
// reused. multipathd is started with the host and rarely stops; asking it
// on every attach and detach cost a process each. A daemon that stopped
// within the TTL costs one attach that waits for a map in vain (and fails
// with a message that names find_multipaths); one that started within it
// costs one single-path attach, as a check a moment earlier would have.
const multipathdTTL = 10 * time.Second

// multipathActive decides whether this Attach uses multipath.
func (c *Client) multipathActive(ctx context.Context) (bool, error) {
	if c.mode == MultipathDisabled {
		return false, nil
	}
	c.mpMu.Lock()
	defer c.mpMu.Unlock()
	if time.Now().Before(c.mpUntil) {
		return c.mpActive, nil
	}
	// "pid 1234 idle|running": anything else (no binary, no socket, an
	// error text) means no daemon.
	out, err := c.run(ctx, "multipathd", "show", "daemon")
	if err == nil && strings.HasPrefix(strings.TrimSpace(string(out)), "pid ") {
		c.mpActive, c.mpUntil = true, time.Now().Add(multipathdTTL)
		return true, nil
	}
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if c.mode != MultipathRequired {
		c.mpActive, c.mpUntil = false, time.Now().Add(multipathdTTL)
	}
	if c.mode == MultipathRequired {
		if err == nil {
			err = fmt.Errorf("unexpected answer %q", truncate(strings.TrimSpace(string(out)), 80))
		}
		return false, fmt.Errorf("multipath is required but multipathd is not running: %w", toolErr(err))
	}
	return false, nil
}

// readMap reads the dm attributes of a block device; ok is false unless it
// is a multipath map.
func (c *Client) readMap(name string) (dmMap, bool) {
	if !validBlockName(name) {
		return dmMap{}, false
	}
	dir := filepath.Join(c.sysRoot, "block", name, "dm")
	uuid, err := readAttr(filepath.Join(dir, "uuid"))
	if err != nil {
		return dmMap{}, false
	}
	m := dmMap{name: name, uuid: strings.TrimSpace(string(uuid))}
	if !strings.HasPrefix(m.uuid, "mpath-") {
		return dmMap{}, false
	}
	mn, err := readAttr(filepath.Join(dir, "name"))
	if err != nil {
		return dmMap{}, false
	}
	m.mapName = strings.TrimSpace(string(mn))
	if m.mapName == "" || strings.ContainsAny(m.mapName, "/\x00") || strings.HasPrefix(m.mapName, "-") {
		return dmMap{}, false
	}
	return m, true
}

// pathMaps returns the multipath maps holding any of paths.
func (c *Client) pathMaps(paths []pathDev) ([]dmMap, error) {
	var maps []dmMap
	seen := map[string]bool{}
	for _, p := range paths {
		hs, err := c.holders(p.dev.name)
		if err != nil {
			return nil, err
		}
		for _, h := range hs {
			if m, ok := c.readMap(h); ok && !seen[h] {
				seen[h] = true
				maps = append(maps, m)
			}
		}
	}
	return maps, nil
}

// mapsBySerial finds the multipath maps of a LUN that its located paths
// do not lead to ("ghost" maps, Trident #812: a map left after its paths
// went, or holding paths on a session or at an address no longer looked
// at). A map is the LUN's when its WWID is ONTAP's form of the serial, when
// one of its own paths (slaves) has the serial on VPD page 0x80, or when
// its WWID is that of one of the LUN's located paths: the last two hold
// for any WWID form, LIO's too (docs/design/architecture.md §7.2).
func (c *Client) mapsBySerial(serial string, paths []pathDev) ([]dmMap, error) {
	uuids, err := filepath.Glob(filepath.Join(c.sysRoot, "block", "*", "dm", "uuid"))
	if err != nil {
		return nil, err
	}
	pathWWIDs := map[string]bool{}
	for _, p := range paths {
		if w := c.devWWID(p.dev.name); w != "" {
			pathWWIDs["mpath-"+w] = true
		}
	}
	var maps []dmMap
	for _, u := range uuids {
		name := filepath.Base(filepath.Dir(filepath.Dir(u)))
		m, ok := c.readMap(name)
		if ok && (uuidHasSerial(m.uuid, serial) || pathWWIDs[strings.ToLower(m.uuid)] || c.slaveHasSerial(m, serial)) {
			maps = append(maps, m)
		}
	}
	return maps, nil
}

// slaveHasSerial reports whether a path of map m is the LUN with serial.
func (c *Client) slaveHasSerial(m dmMap, serial string) bool {
	slaves, _ := readDirNames(filepath.Join(c.sysRoot, "block", m.name, "slaves"))
	for _, s := range slaves {
		if !validBlockName(s) {
			continue
		}
		b, err := readAttr(filepath.Join(c.sysRoot, "block", s, "device", "vpd_pg80"))
		if err != nil {
			continue
		}
		if got, err := parseVPDPage80(b); err == nil && got == serial {
			return true
		}
	}
	return false
}

// devWWID is the WWID multipathd names a SCSI disk's map by, from the
// kernel's "naa.<hex>" (VPD page 0x83): "3<hex>"; "" for other forms.
func (c *Client) devWWID(name string) string {
	if !validBlockName(name) {
		return ""
	}
	b, err := readAttr(filepath.Join(c.sysRoot, "block", name, "device", "wwid"))
	if err != nil {
		return ""
	}
	naa, ok := strings.CutPrefix(strings.ToLower(strings.TrimSpace(string(b))), "naa.")
	if !ok || naa == "" || strings.Trim(naa, "0123456789abcdef") != "" {
		return ""
	}
	return "3" + naa
}

// netappMapPrefix starts the uuid of a map of an ONTAP LUN: its WWID is
// NAA type 6 with NetApp's OUI, whose vendor-specific part is "0" +
// hex(serial).
const netappMapPrefix = "mpath-3600a0980"

// uuidHasSerial checks a map's uuid against a LUN serial in ONTAP's form:
// netappMapPrefix + hex(serial).
func uuidHasSerial(uuid, serial string) bool {
	u := strings.ToLower(uuid)
	return strings.HasPrefix(u, netappMapPrefix) && strings.HasSuffix(u, hex.EncodeToString([]byte(serial)))
}

// verifyMap checks that a map is the LUN's: every path under it has the
// serial on VPD page 0x80, and a WWID in ONTAP's form carries it (a map
// whose WWID names another LUN is stale, whatever its paths report now).
// Other targets derive their WWIDs otherwise — LIO: 36001405 and the
// serial's hex digits — so there the paths alone decide, and there must be
// one. It returns the map's paths.
func (c *Client) verifyMap(m dmMap, serial string) ([]string, error) {
	netapp := strings.HasPrefix(strings.ToLower(m.uuid), netappMapPrefix)
	if netapp && !uuidHasSerial(m.uuid, serial) {
		serialMismatchesTotal.Inc()
		return nil, fmt.Errorf("%w: multipath map %s (%s) is not LUN %q", ErrSerialMismatch, m.name, m.uuid, serial)
	}
	slaves, err := readDirNames(filepath.Join(c.sysRoot, "block", m.name, "slaves"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, s := range slaves {
		if !validBlockName(s) {
			return nil, fmt.Errorf("multipath map %s: odd path name %q", m.name, s)
		}
		b, err := readAttr(filepath.Join(c.sysRoot, "block", s, "device", "vpd_pg80"))
		if err != nil {
			return nil, fmt.Errorf("multipath map %s: path %s: %w", m.name, s, err)
		}
		got, err := parseVPDPage80(b)
		if err != nil {
			return nil, fmt.Errorf("multipath map %s: path %s: %w", m.name, s, err)
		}
		if got != serial {
			serialMismatchesTotal.Inc()
			return nil, fmt.Errorf("%w: multipath map %s of LUN %q has path %s of LUN %q", ErrSerialMismatch, m.name, serial, s, got)
		}
	}
	if !netapp && len(slaves) == 0 {
		serialMismatchesTotal.Inc()
		return nil, fmt.Errorf("%w: multipath map %s (%s) has no path to show it is LUN %q", ErrSerialMismatch, m.name, m.uuid, serial)
	}
	return slaves, nil
}

// refusedAttempts and refusedRetryDelay bound how often a multipath tool
// that refuses while udev and multipathd are still settling is asked
// again: a flush of a map refused as in use while nothing holds it
// (flushMap), a map resize refused right after the rescans (resizeMap).
const (
	refusedAttempts   = 5
	refusedRetryDelay = 500 * time.Millisecond
)

// flushMap removes a multipath map (multipath -f). A map that is gone
// afterwards, whatever multipath said, is flushed.
//
// It runs no `blockdev --flushbufs` on the map first: that has nothing to
// write (docs/design/architecture.md §7.3). The map is removed only once
// nothing holds it open (multipath -f refuses a map in use), and the
// kernel wrote its cache out when its last opener closed it, the file
// system's unmount included; multipath -f itself turns queueing off before
// it removes the map. It cost a process per unstage (issue 18), and on a
// queueing map without a usable path it was the one step that could wait
// for ever.
func (c *Client) flushMap(ctx context.Context, m dmMap) error {
	log := logrus.WithContext(ctx).WithFields(logrus.Fields{"map": m.mapName, "device": m.name})
	dir := filepath.Join(c.sysRoot, "block", m.name)
	for attempt := 1; ; attempt++ {
		_, err := c.run(ctx, "multipath", "-f", m.mapName)
		if err == nil {
			break
		}
		if _, serr := os.Stat(dir); errors.Is(serr, os.ErrNotExist) {
			return nil // removed meanwhile, e.g. by multipathd itself
		}
		if busy, _ := c.inUse(m.name); busy {
			return fmt.Errorf("%w: multipath map %s is still open or mounted", ErrDeviceInUse, m.mapName)
		}
		// Refused with no holder and no mount: a map multipathd has
		// just made is opened for a moment by udev's probes, and
		// multipath -f calls it in use (seen on the real kernel, the
		// VM's faults step). Try again for a short while. Or a process
		// keeps the map open, stuck on I/O the map queues with no path
		// (a raw block volume's writer on a LUN unmapped on ONTAP: no
		// unmount ran under the dead-map watch for it); multipath -f
		// turns queueing off only for a map nobody holds, so it is
		// turned off here, which fails the stuck I/O and lets the
		// process close the map (docs/design/architecture.md §7.3).
		if attempt == 1 {
			c.stopQueueingIfDead(ctx, m)
		}
		if attempt == refusedAttempts || ctx.Err() != nil {
			return fmt.Errorf("flush multipath map %s: %w", m.mapName, toolErr(err))
		}
		log.WithError(toolErr(err)).Info("multipath map refused its flush with nothing holding it; trying again")
		if sleep(ctx, refusedRetryDelay) != nil {
			return fmt.Errorf("flush multipath map %s: %w", m.mapName, toolErr(err))
		}
	}
	if err := c.waitGone(ctx, dir); err != nil {
		return fmt.Errorf("multipath map %s: %w", m.mapName, err)
	}
	log.Info("flushed multipath map")
	return nil
}

// resizeMap makes a map take its paths' new size, and waits until it has at
// least want bytes.
//
// multipathd refuses a resize now and then right after the paths' rescans
// (exit 1, no output; seen on the real kernel, the VM's TestISCSIRawBlock):
// it is still handling the paths' change events, which can reload the map
// at their new size by themselves. So a refused resize is not final: a map
// that has grown meanwhile is done, and one that has not is asked again for
// a short while, as flushMap does with a refused flush. Kubelet would retry
// a failed NodeExpandVolume too, but only after its back-off, with the pod
// waiting.
func (c *Client) resizeMap(ctx context.Context, m dmMap, want int64) (int64, error) {
	for attempt := 1; ; attempt++ {
		out, err := c.run(ctx, "multipathd", "resize", "map", m.mapName)
		if err == nil && strings.TrimSpace(string(out)) == "fail" {
			err = errors.New("multipathd answered fail")
		}
		if err == nil {
			return c.waitSize(ctx, m.name, want)
		}
		err = fmt.Errorf("resize multipath map %s: %w", m.mapName, toolErr(err))
		size, serr := c.blockSize(m.name)
		if serr == nil && size >= want {
			return size, nil
		}
		if errors.Is(serr, os.ErrNotExist) || attempt == refusedAttempts {
			return 0, err
		}
		logrus.WithContext(ctx).WithFields(logrus.Fields{"map": m.mapName, "device": m.name}).WithError(err).
			Info("multipathd refused to resize the map; trying again")
		if serr := sleep(ctx, refusedRetryDelay); serr != nil {
			return 0, err
		}
	}
}
