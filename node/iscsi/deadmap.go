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

// DefaultDeadPathGrace is how long a LUN's multipath map may have all its
// paths failed, at an unstage, before it stops queueing I/O: long enough
// for a path to come back after a brief network or storage outage, short
// enough for the unstage to end within kubelet's deadline (2 minutes).
const DefaultDeadPathGrace = 30 * time.Second

// ReleaseDeadMapsDuring runs unmount, the unmount of a file system on the
// LUN, and watches the LUN's multipath maps while it runs: a map with no
// usable path stops queueing I/O once it has had none for the dead-path
// grace, or at once when it has no path left at all. ONTAP's multipath
// settings queue I/O while no path is up (no_path_retry "queue"), which
// carries I/O through a failover; but a LUN unmapped on ONTAP never gets a
// path back, and the unmount, which writes, would wait in the kernel for
// good (docs/design/architecture.md §7.3). Writes not yet on the LUN are
// lost then; there is nowhere to put them.
//
// The watch runs beside the unmount rather than once before it, because
// multipathd's checker may fail and reinstate an unmapped LUN's paths in
// turn (docs/vm.md, defects 9 and 11): a look that finds a path "active"
// proves nothing, and an unmount that began then hung. So a reinstated
// path does not restart the grace, and the watch outlives the caller's
// context: an unmount stuck in the kernel cannot be killed, and only
// stopping the queueing lets it, and the call, end.
//
// An unmount that fails (busy: a process of the fenced pod is stuck
// writing to the dead map and holds the file system) is not retried by
// waiting: the maps get the rest of their grace, those still or once
// without a path stop queueing, which fails the stuck writes, and the
// unmount runs once more. An unmount that ends within deadPathPoll, the
// common case, asks multipathd nothing.
func (c *Client) ReleaseDeadMapsDuring(ctx context.Context, t Target, unmount func() error) error {
	if _, err := t.normalized(); err != nil {
		return err
	}
	w := &deadMapWatch{c: c, t: t, deadSince: map[string]time.Time{}, released: map[string]bool{}}
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for sleep(wctx, deadPathPoll) == nil {
			if _, done := w.look(wctx, "the unmount of its file system runs"); done {
				return
			}
		}
	}()
	err := unmount()
	stop()
	<-watched
	if err == nil {
		return nil
	}
	for {
		pending, done := w.look(ctx, "its file system could not be unmounted")
		if done || !pending || sleep(ctx, deadPathPoll) != nil {
			break
		}
	}
	if len(w.released) == 0 {
		return err
	}
	return unmount()
}

// deadMapWatch is the state of one ReleaseDeadMapsDuring: the LUN's maps,
// when each was first seen without a usable path, and which stopped
// queueing. The watch's goroutine and the call use it in turn, never at once.
type deadMapWatch struct {
	c         *Client
	t         Target
	maps      []dmMap // nil until the first look
	deadSince map[string]time.Time
	released  map[string]bool
}

// look asks multipathd about the maps once, and stops the queueing of
// those whose grace has run out. pending says a map seen without a usable
// path still queues; done that there is nothing (more) to watch: no
// multipathd, no map, an answer it cannot read, or ctx ended.
func (w *deadMapWatch) look(ctx context.Context, while string) (pending, done bool) {
	c := w.c
	log := logrus.WithContext(ctx).WithField("lun", w.t.Serial)
	if w.maps == nil {
		if mp, err := c.multipathActive(ctx); err != nil || !mp {
			return false, true
		}
		_, _, found, err := c.lunDevices(ctx, w.t)
		if err != nil || len(found) == 0 {
			if err != nil && ctx.Err() == nil {
				log.WithError(err).Debug("no multipath map of the LUN to watch")
			}
			return false, true
		}
		w.maps = found
	}
	active, ok, err := c.activePaths(ctx)
	switch {
	case ctx.Err() != nil:
		return false, true
	case err != nil:
		log.WithError(err).Warn("multipathd does not answer while " + while + "; asking again")
		return true, false
	case !ok:
		return false, true // multipathd does not say: leave the maps as they are
	}
	now := time.Now()
	for _, m := range w.maps {
		if w.released[m.mapName] {
			continue
		}
		first, seen := w.deadSince[m.mapName]
		usable := active[m.mapName] > 0
		if usable && !seen {
			continue
		}
		if !seen {
			first, w.deadSince[m.mapName] = now, now
			log.WithFields(logrus.Fields{"map": m.mapName, "grace": c.deadPathGrace}).
				Info("the LUN's multipath map has no usable path while " + while + "; waiting for one to come back")
		}
		// Once seen without a path, a map's path may be reinstated and fail
		// again in turn: only the grace ends its wait.
		slaves, _ := readDirNames(filepath.Join(c.sysRoot, "block", m.name, "slaves"))
		if (usable || len(slaves) > 0) && now.Sub(first) < c.deadPathGrace {
			pending = true
			continue
		}
		if err := c.disableQueueing(ctx, m); err != nil {
			if ctx.Err() == nil {
				log.WithError(err).Warn("asking again")
			}
			pending = true
			continue
		}
		w.released[m.mapName] = true
	}
	return pending, false
}

// deadPathPoll paces the watch of an unmount: the grace is seconds long,
// each look asks multipathd, which is busy with the very paths that are
// failing, and most unmounts end before the first look.
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

// stopQueueingIfDead turns queueing off on a map multipathd shows without
// an active path; what goes wrong is logged, as the caller goes on anyway.
func (c *Client) stopQueueingIfDead(ctx context.Context, m dmMap) {
	log := logrus.WithContext(ctx).WithField("map", m.mapName)
	active, ok, err := c.activePaths(ctx)
	switch {
	case err != nil:
		log.WithError(err).Warn("could not ask multipathd whether the map has a usable path")
	case ok && active[m.mapName] == 0:
		if err := c.disableQueueing(ctx, m); err != nil {
			log.WithError(err).Warn("could not stop the map queueing")
		}
	}
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
