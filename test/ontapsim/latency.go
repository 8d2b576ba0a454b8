package ontapsim

import (
	"fmt"
	"time"
)

// Range is a latency interval; each request draws uniformly from it.
type Range struct {
	Min, Max time.Duration
}

func (r Range) String() string { return fmt.Sprintf("%v-%v", r.Min, r.Max) }

// LatencyModel is the time the simulator spends per request class and per
// job kind. The zero value injects nothing. Request-class delays are slept
// before the request is handled; job durations run between the job's
// creation and its completion (10 % queued, the rest running). Both are
// added to Stats.Injected, so a benchmark can compare client wall time with
// the latency the simulator imposed.
type LatencyModel struct {
	Request      Range // GETs and the accepting phase of async operations
	SyncMutation Range // igroup, initiator, LUN map, export policy/rule, LUN attribute, CHAP, LUN modify/delete
	LUNCreate    Range

	VolumeCreate   Range
	VolumePatch    Range
	VolumeDelete   Range
	SnapshotCreate Range
	SnapshotDelete Range
	CloneCreate    Range
	CloneSplit     Range

	// Qtrees and quotas (docs/design/economy.md §6): QuotaRule is a rule
	// create, modify or delete with its automatic resize; QuotaInitialize
	// is how long quotas stay "initializing" after being turned on.
	QtreeCreate     Range
	QtreePatch      Range
	QtreeDelete     Range
	QuotaRule       Range
	QuotaInitialize Range
}

// RealisticLatency returns the figures of docs/design/ontap-rest.md §4.7 (measured on
// real systems in Trident issue #1144 and the suggested simulator defaults).
// The ranges are the jitter.
func RealisticLatency() LatencyModel {
	ms := time.Millisecond
	return LatencyModel{
		Request:        Range{20 * ms, 80 * ms},
		SyncMutation:   Range{50 * ms, 200 * ms},
		LUNCreate:      Range{200 * ms, 800 * ms},
		VolumeCreate:   Range{800 * ms, 1500 * ms},
		VolumePatch:    Range{300 * ms, 800 * ms},
		VolumeDelete:   Range{500 * ms, 2000 * ms},
		SnapshotCreate: Range{300 * ms, 1000 * ms},
		SnapshotDelete: Range{300 * ms, 1000 * ms},
		CloneCreate:    Range{1000 * ms, 3000 * ms},
		CloneSplit:     Range{5000 * ms, 15000 * ms},

		QtreeCreate:     Range{100 * ms, 400 * ms},
		QtreePatch:      Range{100 * ms, 300 * ms},
		QtreeDelete:     Range{100 * ms, 500 * ms},
		QuotaRule:       Range{200 * ms, 800 * ms},
		QuotaInitialize: Range{1000 * ms, 3000 * ms},
	}
}

// ParseLatency accepts "off" (or "") and "realistic".
func ParseLatency(s string) (LatencyModel, error) {
	switch s {
	case "", "off":
		return LatencyModel{}, nil
	case "realistic":
		return RealisticLatency(), nil
	}
	return LatencyModel{}, fmt.Errorf("latency %q: want off or realistic", s)
}

// latencyClass names the request-class delay of a route.
type latencyClass int

const (
	latRequest latencyClass = iota
	latSyncMutation
	latLUNCreate
	latNone // /sim endpoints
)

func (m LatencyModel) class(c latencyClass) Range {
	switch c {
	case latRequest:
		return m.Request
	case latSyncMutation:
		return m.SyncMutation
	case latLUNCreate:
		return m.LUNCreate
	}
	return Range{}
}

// draw picks a duration in r using the simulator's seeded source.
func (s *Simulator) draw(r Range) time.Duration {
	if r.Max <= r.Min {
		return r.Min
	}
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return r.Min + time.Duration(s.rng.Int64N(int64(r.Max-r.Min)+1))
}

// sleep waits d or until the simulator closes, whichever comes first.
func (s *Simulator) sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.closing:
	}
}
