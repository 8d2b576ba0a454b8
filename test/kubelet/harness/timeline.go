package harness

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
)

// Kind groups timeline events.
type Kind string

// Timeline event kinds.
const (
	KindStep    Kind = "step"    // scenario step
	KindProc    Kind = "proc"    // process started, signalled, exited
	KindKubelet Kind = "kubelet" // plugin manager call into the CSI handler, kubelet start/stop
	KindState   Kind = "state"   // a sampled signal changed
	KindFS      Kind = "fs"      // a file appeared in or left plugins_registry or the plugin dir
	KindLease   Kind = "lease"   // lease.json changed
)

// Event is one line of a timeline.
type Event struct {
	At   time.Time
	Kind Kind
	Text string
}

// Signal is a sampled availability signal.
type Signal string

// The signals sampled through kubelet's own code.
const (
	// SigRegistered: the CSI handler has the driver (ValidatePlugin probe).
	SigRegistered Signal = "registered"
	// SigCSINode: the CSINode object lists the driver.
	SigCSINode Signal = "csinode"
	// SigServed: a kubelet CSI call through the registered endpoint was answered.
	SigServed Signal = "served"
)

// Timeline records events and sampled signals of one scenario run. It is
// safe for concurrent use.
type Timeline struct {
	mu     sync.Mutex
	start  time.Time
	events []Event
	series map[Signal]*Series
	calls  []TimedCall
	subs   []func(Event)
}

// TimedCall is a handler call with the time it returned.
type TimedCall struct {
	At time.Time
	HandlerCall
}

// NewTimeline starts a timeline at now.
func NewTimeline() *Timeline {
	return &Timeline{start: time.Now(), series: map[Signal]*Series{}}
}

// Start is the timeline's zero.
func (tl *Timeline) Start() time.Time { return tl.start }

// Add records an event at now.
func (tl *Timeline) Add(kind Kind, format string, args ...any) {
	tl.AddAt(time.Now(), kind, format, args...)
}

// AddAt records an event at a given time.
func (tl *Timeline) AddAt(at time.Time, kind Kind, format string, args ...any) {
	e := Event{At: at, Kind: kind, Text: fmt.Sprintf(format, args...)}
	tl.mu.Lock()
	tl.events = append(tl.events, e)
	subs := tl.subs
	tl.mu.Unlock()
	for _, f := range subs {
		f(e)
	}
}

// Subscribe calls f with every event recorded from now on, in the
// recording goroutine.
func (tl *Timeline) Subscribe(f func(Event)) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.subs = append(tl.subs, f)
}

// Format prints one event relative to the timeline's start.
func (tl *Timeline) Format(e Event) string {
	return fmt.Sprintf("%+10.3fs %-7s %s", e.At.Sub(tl.start).Seconds(), e.Kind, e.Text)
}

// Call records a handler call.
func (tl *Timeline) Call(c HandlerCall) {
	now := time.Now()
	tl.mu.Lock()
	tl.calls = append(tl.calls, TimedCall{At: now, HandlerCall: c})
	tl.mu.Unlock()
	res := "ok"
	if c.Err != "" {
		res = "error: " + c.Err
	}
	switch c.Op {
	case OpDeregister:
		tl.AddAt(now, KindKubelet, "%s(%s, endpoint %q)", c.Op, c.Name, c.Endpoint)
	default:
		tl.AddAt(now, KindKubelet, "%s(%s, %s, %v) %s", c.Op, c.Name, c.Endpoint, c.Versions, res)
	}
}

// Calls returns the handler calls of op recorded at or after since.
func (tl *Timeline) Calls(op HandlerOp, since time.Time) []TimedCall {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var out []TimedCall
	for _, c := range tl.calls {
		if c.Op == op && !c.At.Before(since) {
			out = append(out, c)
		}
	}
	return out
}

// Sample records one sample of sig. Only changes become timeline events.
func (tl *Timeline) Sample(sig Signal, at time.Time, ok bool, detail string) {
	tl.mu.Lock()
	s := tl.series[sig]
	if s == nil {
		s = &Series{Signal: sig}
		tl.series[sig] = s
	}
	changed := s.add(at, ok, detail)
	tl.mu.Unlock()
	if changed {
		if detail != "" {
			tl.AddAt(at, KindState, "%s=%t (%s)", sig, ok, detail)
		} else {
			tl.AddAt(at, KindState, "%s=%t", sig, ok)
		}
	}
}

// Series returns a copy of sig's series.
func (tl *Timeline) Series(sig Signal) Series {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	s := tl.series[sig]
	if s == nil {
		return Series{Signal: sig}
	}
	c := *s
	c.changes = append([]Change(nil), s.changes...)
	return c
}

// Events returns a copy of the events in time order.
func (tl *Timeline) Events() []Event {
	tl.mu.Lock()
	ev := append([]Event(nil), tl.events...)
	tl.mu.Unlock()
	sort.SliceStable(ev, func(i, j int) bool { return ev[i].At.Before(ev[j].At) })
	return ev
}

// Write prints the timeline, times relative to its start.
func (tl *Timeline) Write(w io.Writer) {
	for _, e := range tl.Events() {
		fmt.Fprintln(w, tl.Format(e))
	}
	for _, sig := range []Signal{SigRegistered, SigCSINode, SigServed} {
		s := tl.Series(sig)
		fmt.Fprintf(w, "# %s: %d samples, %d intervals over %v (machine load), largest %v\n",
			sig, s.Samples, s.Late, MaxSampleSpacing, s.MaxSpacing.Round(time.Microsecond))
	}
}

// String is the printed timeline.
func (tl *Timeline) String() string {
	var b strings.Builder
	tl.Write(&b)
	return b.String()
}

// Change is a sample whose value differs from the previous one.
type Change struct {
	At     time.Time
	OK     bool
	Detail string
}

// MaxSampleSpacing is the largest time between two samples the design
// allows (docs/design/registration.md §6).
const MaxSampleSpacing = 10 * time.Millisecond

// Series is the history of one signal as its changes.
type Series struct {
	Signal     Signal
	Samples    int
	MaxSpacing time.Duration // largest time between two samples
	Late       int           // intervals between samples longer than MaxSampleSpacing
	last       time.Time
	changes    []Change
}

func (s *Series) add(at time.Time, ok bool, detail string) bool {
	s.Samples++
	if !s.last.IsZero() {
		gap := at.Sub(s.last)
		s.MaxSpacing = max(s.MaxSpacing, gap)
		if gap > MaxSampleSpacing {
			s.Late++
		}
	}
	s.last = at
	if n := len(s.changes); n > 0 && s.changes[n-1].OK == ok {
		return false
	}
	s.changes = append(s.changes, Change{At: at, OK: ok, Detail: detail})
	return true
}

// Changes returns the recorded changes.
func (s Series) Changes() []Change { return s.changes }

// At reports the value of the signal at t: the last change at or before t.
// known is false before the first sample.
func (s Series) At(t time.Time) (ok, known bool) {
	for i := len(s.changes) - 1; i >= 0; i-- {
		if !s.changes[i].At.After(t) {
			return s.changes[i].OK, true
		}
	}
	return false, false
}

// FirstTrue returns the first time at or after since when the signal was
// true (since itself if it was true then).
func (s Series) FirstTrue(since time.Time) (time.Time, bool) {
	if ok, _ := s.At(since); ok {
		return since, true
	}
	for _, c := range s.changes {
		if c.At.After(since) && c.OK {
			return c.At, true
		}
	}
	return time.Time{}, false
}

// Interval is a time span; Open means it had not ended when observed.
type Interval struct {
	From, To time.Time
	Open     bool
	Detail   string
}

// Duration of the interval.
func (i Interval) Duration() time.Duration { return i.To.Sub(i.From) }

// Gaps returns the intervals within [from, to] in which the signal was
// false, as sampled. A false stretch starts at the first false sample and
// ends at the next true one.
func (s Series) Gaps(from, to time.Time) []Interval {
	var out []Interval
	var cur *Interval
	if ok, known := s.At(from); known && !ok {
		cur = &Interval{From: from}
	}
	for _, c := range s.changes {
		if !c.At.After(from) {
			continue
		}
		if c.At.After(to) {
			break
		}
		switch {
		case !c.OK && cur == nil:
			cur = &Interval{From: c.At, Detail: c.Detail}
		case c.OK && cur != nil:
			cur.To = c.At
			out = append(out, *cur)
			cur = nil
		}
	}
	if cur != nil {
		cur.To, cur.Open = to, true
		out = append(out, *cur)
	}
	return out
}

// Union merges overlapping intervals.
func Union(sets ...[]Interval) []Interval {
	var all []Interval
	for _, s := range sets {
		all = append(all, s...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].From.Before(all[j].From) })
	var out []Interval
	for _, iv := range all {
		if n := len(out); n > 0 && !iv.From.After(out[n-1].To) {
			if iv.To.After(out[n-1].To) {
				out[n-1].To = iv.To
				out[n-1].Open = iv.Open
			}
			continue
		}
		out = append(out, iv)
	}
	return out
}

// Total sums the durations of intervals.
func Total(ivs []Interval) time.Duration {
	var d time.Duration
	for _, iv := range ivs {
		d += iv.Duration()
	}
	return d
}

// FormatIntervals prints intervals relative to start.
func FormatIntervals(ivs []Interval, start time.Time) string {
	if len(ivs) == 0 {
		return "none"
	}
	var parts []string
	for _, iv := range ivs {
		end := fmt.Sprintf("%+.3fs", iv.To.Sub(start).Seconds())
		if iv.Open {
			end = "still at " + end
		}
		p := fmt.Sprintf("[%+.3fs, %s] %v", iv.From.Sub(start).Seconds(), end, iv.Duration().Round(time.Millisecond))
		if iv.Detail != "" {
			p += " (" + iv.Detail + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}
