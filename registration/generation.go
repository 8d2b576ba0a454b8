package registration

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ontap-csi/ontap-csi/internal/filelock"
)

// generation is one generation this process allocated.
type generation struct {
	g            uint64
	info         NodeInfo
	alive        *filelock.Lock // flock on g<G>.alive; nil once released
	reg          *regServer
	registered   bool
	retired      bool // its socket was renamed away or unlinked by this process
	deregistered bool // unlinked on purpose (uninstall or shutdown)
}

// generations are the generations this process allocated.
type generations struct {
	current *generation   // the newest; nil before the first Acquire
	all     []*generation // the current one and those whose registration server may still run
	floor   uint64        // lowest acceptable next generation (Acquire step 7 jumps)
}

// add makes gen the current generation. One g<G>.alive lock per process:
// its newest generation stands for it, so the previous one's is released.
func (gs *generations) add(gen *generation) {
	if prev := gs.current; prev != nil && prev.alive != nil {
		prev.alive.Release()
		prev.alive = nil
	}
	gs.current = gen
	gs.all = append(gs.all, gen)
}

func (gs *generations) owns(g uint64) bool {
	return slices.ContainsFunc(gs.all, func(x *generation) bool { return x.g == g })
}

// markRetired records that the registration socket name of generation g,
// if it is one of this process's, was retired.
func (gs *generations) markRetired(name string, g uint64) {
	for _, gen := range gs.all {
		if gen.g == g && gen.reg != nil && gen.reg.name == name {
			gen.retired = true
		}
	}
}

// reap stops registration servers that are done: not the holder's, socket
// no longer on disk as ours (retired), and past their linger (I5).
func (gs *generations) reap(lease *Lease, now time.Time, linger time.Duration) {
	var holderG uint64
	if lease != nil {
		holderG = lease.Generation
	}
	for _, gen := range gs.all {
		r := gen.reg
		if r == nil || r.stopped {
			continue
		}
		active := gen.g == holderG && !gen.deregistered
		if !active && !r.sock.owned() && !now.Before(r.lingerUntil(linger)) {
			r.stop()
		}
	}
	gs.all = slices.DeleteFunc(gs.all, func(gen *generation) bool {
		return gen != gs.current && (gen.reg == nil || gen.reg.stopped)
	})
}

// lingering reports whether a registration server is within its linger
// time (I5): kubelet may still call NotifyRegistrationStatus on it.
func (gs *generations) lingering(now time.Time, linger time.Duration) bool {
	for _, gen := range gs.all {
		if gen.reg != nil && !gen.reg.stopped && now.Before(gen.reg.lingerUntil(linger)) {
			return true
		}
	}
	return false
}

// stopServers stops every registration server; the sockets stay (I7).
func (gs *generations) stopServers() {
	for _, gen := range gs.all {
		if gen.reg != nil {
			gen.reg.stop()
		}
	}
}

// releaseLocks releases the g<G>.alive locks: this process no longer stands
// for any generation.
func (gs *generations) releaseLocks() {
	for _, gen := range gs.all {
		if gen.alive != nil {
			gen.alive.Release()
			gen.alive = nil
		}
	}
}

// nextGeneration is Acquire step 2's rule:
//
//	G = max(1 + lease.generation, 1 + every generation named by files, now in ms)
//
// The clock term keeps G above anything kubelet may still hold even after
// the plugin dir was wiped; the other terms keep G monotonic if the clock
// steps back (I4). floor lets a caller jump above a version kubelet named.
func nextGeneration(prev *Lease, onDisk uint64, now time.Time, floor uint64) uint64 {
	g := uint64(now.UnixMilli())
	if prev != nil && prev.Generation+1 > g {
		g = prev.Generation + 1
	}
	if onDisk+1 > g {
		g = onDisk + 1
	}
	if floor > g {
		g = floor
	}
	return g
}

// allocation is the outcome of Acquire step 2.
type allocation struct {
	g     uint64
	alive *filelock.Lock // exclusive flock on g<G>.alive, held for the generation's life
	prev  *Lease         // the lease before this allocation (nil if none or corrupt)
	// prevErr is set when the previous lease.json was unreadable.
	prevErr error
	// prevAlive reports whether prev's generation was alive when replaced.
	prevAlive bool
}

// allocateGeneration is Acquire step 2, called with handover.lock held:
// compute G, create and lock g<G>.alive, write the lease naming G.
// holding, when not 0, is the generation a holder re-registers from: the
// allocation is refused with errNotHolder unless the lease still names it.
func (l layout) allocateGeneration(newLease func(g uint64) *Lease, floor, holding uint64) (*allocation, error) {
	prev, prevErr := readLease(l.leasePath())
	if prevErr != nil && !errors.Is(prevErr, errCorruptLease) {
		return nil, prevErr
	}
	if holding != 0 && (prev == nil || prev.Generation != holding) {
		return nil, errNotHolder
	}
	onDisk, err := l.maxGenerationOnDisk()
	if err != nil {
		return nil, err
	}
	a := &allocation{prev: prev, prevErr: prevErr}
	a.g = nextGeneration(prev, onDisk, time.Now(), floor)
	if prev != nil {
		if a.prevAlive, err = filelock.Locked(l.alivePath(prev.Generation)); err != nil {
			return nil, err
		}
	}
	// G is fresh, so nobody else locks this file; the momentary shared lock
	// of `ontap-csi status` only delays us.
	if a.alive, err = filelock.Acquire(context.Background(), l.alivePath(a.g), filelock.Exclusive, 0o644); err != nil {
		return nil, err
	}
	if err := writeLease(l.leasePath(), newLease(a.g)); err != nil {
		a.alive.Remove()
		a.alive.Release()
		return nil, err
	}
	return a, nil
}

// maxGenerationOnDisk returns the highest generation named by any of our
// files in REG_DIR (live, dot-named and retired registration sockets) and
// PLUGIN_DIR (g<G>.alive).
func (l layout) maxGenerationOnDisk() (uint64, error) {
	var max uint64
	for _, dir := range []string{l.regDir, l.pluginDir} {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return 0, err
		}
		for _, e := range ents {
			g, ok := l.generationOfRegFile(e.Name())
			if !ok {
				g, ok = parseAliveName(e.Name())
			}
			if ok && g > max {
				max = g
			}
		}
	}
	return max, nil
}

// liveGenerations returns, ascending, the generations whose g<G>.alive is
// locked by a live process.
func (l layout) liveGenerations() ([]uint64, error) {
	ents, err := os.ReadDir(l.pluginDir)
	if err != nil {
		return nil, err
	}
	var live []uint64
	for _, e := range ents {
		g, ok := parseAliveName(e.Name())
		if !ok {
			continue
		}
		held, err := filelock.Locked(filepath.Join(l.pluginDir, e.Name()))
		if err != nil {
			return nil, err
		}
		if held {
			live = append(live, g)
		}
	}
	slices.Sort(live)
	return live, nil
}
