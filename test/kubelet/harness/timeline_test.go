package harness

import (
	"errors"
	"testing"
	"time"
)

func TestSeriesGaps(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type sample struct {
		ms int
		ok bool
	}
	tests := []struct {
		name     string
		samples  []sample
		from, to int
		want     []Interval
	}{
		{
			name:    "always true",
			samples: []sample{{0, true}, {5, true}, {10, true}},
			from:    0,
			to:      10,
		},
		{
			name:    "one gap closed by a true sample",
			samples: []sample{{0, true}, {5, false}, {10, false}, {15, true}, {20, true}},
			from:    0,
			to:      20,
			want:    []Interval{{From: at(5), To: at(15)}},
		},
		{
			name:    "still false at the end is open",
			samples: []sample{{0, true}, {5, false}, {10, false}},
			from:    0,
			to:      30,
			want:    []Interval{{From: at(5), To: at(30), Open: true}},
		},
		{
			name:    "false when the window opens counts from the window",
			samples: []sample{{0, false}, {20, true}},
			from:    10,
			to:      30,
			want:    []Interval{{From: at(10), To: at(20)}},
		},
		{
			name:    "gaps outside the window are ignored",
			samples: []sample{{0, false}, {5, true}, {50, false}, {55, true}},
			from:    10,
			to:      40,
		},
		{
			name:    "two gaps",
			samples: []sample{{0, true}, {5, false}, {10, true}, {20, false}, {30, true}},
			from:    0,
			to:      40,
			want:    []Interval{{From: at(5), To: at(10)}, {From: at(20), To: at(30)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s Series
			for _, x := range tt.samples {
				s.add(at(x.ms), x.ok, "")
			}
			got := s.Gaps(at(tt.from), at(tt.to))
			if len(got) != len(tt.want) {
				t.Fatalf("Gaps = %v, want %v", got, tt.want)
			}
			for i := range got {
				if !got[i].From.Equal(tt.want[i].From) || !got[i].To.Equal(tt.want[i].To) || got[i].Open != tt.want[i].Open {
					t.Errorf("gap %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestSeriesCountsLateSamples(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var s Series
	for _, ms := range []int{0, 5, 10, 40, 45} {
		s.add(t0.Add(time.Duration(ms)*time.Millisecond), true, "")
	}
	if s.Samples != 5 || s.Late != 1 || s.MaxSpacing != 30*time.Millisecond {
		t.Errorf("Samples %d, Late %d, MaxSpacing %v; want 5, 1, 30ms", s.Samples, s.Late, s.MaxSpacing)
	}
	if n := len(s.Changes()); n != 1 {
		t.Errorf("%d changes recorded for a constant signal, want 1", n)
	}
}

func TestUnion(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	a := []Interval{{From: at(0), To: at(10)}, {From: at(50), To: at(60)}}
	b := []Interval{{From: at(5), To: at(20)}, {From: at(70), To: at(80), Open: true}}
	got := Union(a, b)
	want := []Interval{{From: at(0), To: at(20)}, {From: at(50), To: at(60)}, {From: at(70), To: at(80), Open: true}}
	if len(got) != len(want) {
		t.Fatalf("Union = %v, want %v", got, want)
	}
	for i := range got {
		if !got[i].From.Equal(want[i].From) || !got[i].To.Equal(want[i].To) || got[i].Open != want[i].Open {
			t.Errorf("interval %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if d := Total(got); d != 40*time.Millisecond {
		t.Errorf("Total = %v, want 40ms", d)
	}
}

func TestClassifyCall(t *testing.T) {
	tests := []struct {
		name string
		err  error
		code string
		want Outcome
	}{
		{"answer", nil, "", Served},
		{"seed bug lookup", errors.New("driver name csi.trident.netapp.io not found in the list of registered CSI drivers"), "", NotRegistered},
		{"nothing listens", errors.New("rpc error: code = Unavailable desc = connection refused"), "Unavailable", Unreachable},
		{"no answer in time", errors.New("context deadline exceeded"), "DeadlineExceeded", Unreachable},
		{"plain transport error", errors.New("dial unix: no such file"), "", Unreachable},
		{"driver answered with an error", errors.New("rpc error: code = NotFound desc = no volume"), "NotFound", Served},
		{"driver failed the call", errors.New("rpc error: code = Unknown desc = boom"), "Unknown", Served},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClassifyCall(tt.err, tt.code).Outcome; got != tt.want {
				t.Errorf("ClassifyCall = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestGeneration(t *testing.T) {
	tests := []struct {
		versions []string
		want     uint64
	}{
		{[]string{"1.0.0"}, 0},
		{[]string{"1.0.1796225121467"}, 1796225121467},
		{[]string{"v1.0.7", "1.0.9"}, 9},
		{[]string{"1.2.0", "2.0.5"}, 0},
		{nil, 0},
	}
	for _, tt := range tests {
		if got := Generation(tt.versions); got != tt.want {
			t.Errorf("Generation(%v) = %d, want %d", tt.versions, got, tt.want)
		}
	}
}
