package iscsi

import (
	"testing"
	"time"
)

// TestBackoff: the waits look again after 1 ms and double the pause up to
// the cap, where they stay.
func TestBackoff(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		looks int
		want  []time.Duration
	}{
		{"first look", 1, []time.Duration{ms}},
		{"doubling", 5, []time.Duration{ms, 2 * ms, 4 * ms, 8 * ms, 16 * ms}},
		{"capped", 8, []time.Duration{ms, 2 * ms, 4 * ms, 8 * ms, 16 * ms, 20 * ms, 20 * ms, 20 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b backoff
			for i := 0; i < tc.looks; i++ {
				if got := b.next(); got != tc.want[i] {
					t.Fatalf("pause %d = %s, want %s", i, got, tc.want[i])
				}
			}
		})
	}
}
