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

// defaultDeadPathGrace is how long a LUN's multipath map may have all its
// paths failed, at an unstage, before it stops queueing I/O: long enough
// for a path to come back after a brief network or storage outage, short
// enough for the unstage to end within kubelet's deadline (2 minutes).
const defaultDeadPathGrace = 30 * time.Second

// ReleaseDeadMaps makes the LUN's multipath maps that have no usable path
// — and got none back within the dead-path grace — stop queueing I/O, so
// that what writes to them fails instead of waiting for ever. ONTAP's
// multipath settings queue I/O while no path is up (no_path_retry
// "queue"), which carries I/O through a failover; but a LUN unmapped on
// ONTAP never gets a path back, and an unmount of its file system, which
// writes, would hang in the kernel for good: the unstage would never
// return (docs/design/architecture.md §7.3).
// Writes not yet on the LUN are lost then; there is nowhere to put them.
// The node calls it before it unmounts a staged LUN (or detaches a raw
// one); Detach releases such maps too, without a grace: its caller had it.
func (c *Client) ReleaseDeadMaps(ctx context.Context, t Target) error {
	if _, err := t.normalized(); err != nil {
		return err
	}
	if mp, err := c.multipathActive(ctx); err != nil || !mp {
		return err
	}
	t, _, maps, err := c.lunDevices(ctx, t)
	if err != nil {
		return err
	}
	return c.releaseDead(ctx, t, maps, c.deadPathGrace)
}

// releaseDead stops queueing on those of maps that have no active path.
// A map that still has failed paths gets grace for one to come back; one
// without any path cannot get one back by waiting.
func (c *Client) releaseDead(ctx context.Context, t Target, maps []dmMap, grace time.Duration) error {
	if len(maps) == 0 {
		return nil
	}
	deadline := time.Now().Add(grace)
	var dead []dmMap
	for {
		active, ok, err := c.activePaths(ctx)
		if err != nil {
			return fmt.Errorf("LUN %q: %w", t.Serial, err)
		}
		if !ok {
			return nil // multipathd does not say: leave the maps as they are
		}
		dead, dead = dead[:0], nil
		waitFor := false
		for _, m := range maps {
			if active[m.mapName] == 0 {
				dead = append(dead, m)
				slaves, _ := readDirNames(filepath.Join(c.sysRoot, "block", m.name, "slaves"))
				waitFor = waitFor || len(slaves) > 0
			}
		}
		if len(dead) == 0 || !waitFor || time.Now().After(deadline) {
			break
		}
		if err := sleep(ctx, deadPathPoll); err != nil {
			return fmt.Errorf("waiting for a usable path of LUN %q: %w", t.Serial, err)
		}
	}
	for _, m := range dead {
		if err := c.disableQueueing(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// deadPathPoll paces the wait for a path to come back: the grace is
// seconds long, and each look asks multipathd, which is busy with the very
// paths that are failing.
const deadPathPoll = 250 * time.Millisecond

// multipathdTimeout bounds each multipathd command of a dead-map release.
// It answers within a second even on a loaded VM, but it once did not
// answer at all for minutes while its checker failed and reinstated the
// paths of an unmapped LUN (docs/vm.md, 2026-12-04): the call then fails
// with a message that says so, and kubelet's retry asks again, instead of
// the call hanging silently until kubelet's deadline.
var multipathdTimeout = 15 * time.Second

// multipathd runs a multipathd command bounded by multipathdTimeout; its
// timing out is an error that names the command.
func (c *Client) multipathd(ctx context.Context, args ...string) ([]byte, error) {
	mctx, cancel := context.WithTimeout(ctx, multipathdTimeout)
	defer cancel()
	out, err := c.run(mctx, "multipathd", args...)
	if err != nil && ctx.Err() == nil && mctx.Err() != nil {
		return nil, fmt.Errorf("multipathd did not answer %q within %s; it may be busy with failing paths, try again: %w",
			strings.Join(args, " "), multipathdTimeout, errWaitTimedOut)
	}
	return out, err
}

// activePaths counts the active paths of each multipath map, by map name,
// as multipathd sees them; ok is false when it does not say, err set when
// it does not answer in time or the caller's context ended.
func (c *Client) activePaths(ctx context.Context) (map[string]int, bool, error) {
	out, err := c.multipathd(ctx, "show", "paths", "raw", "format", "%m %t")
	if errors.Is(err, errWaitTimedOut) {
		return nil, false, err
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		return nil, false, nil
	}
	active := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case len(f) != 2:
			return nil, false, nil
		case f[1] == "active":
			active[f[0]]++
		}
	}
	return active, true, nil
}

func (c *Client) disableQueueing(ctx context.Context, m dmMap) error {
	logrus.WithContext(ctx).WithFields(logrus.Fields{"map": m.mapName, "device": m.name, "grace": c.deadPathGrace}).
		Warn("no path of the LUN's multipath map is usable: it stops queueing I/O, so that an unmount and a flush can end; writes not yet on the LUN are lost")
	out, err := c.multipathd(ctx, "disablequeueing", "map", m.mapName)
	if err == nil && strings.TrimSpace(string(out)) != "ok" {
		err = errors.New("multipathd answered " + truncate(strings.TrimSpace(string(out)), 80))
	}
	if err != nil {
		return fmt.Errorf("stop queueing on multipath map %s: %w", m.mapName, toolErr(err))
	}
	return nil
}
