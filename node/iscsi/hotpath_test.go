package iscsi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestBackoff: a wait looks again after a quarter of the time it has
// waited so far, after 1 ms at least and 20 ms at most; a new wait (a zero
// backoff) starts again at 1 ms.
func TestBackoff(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		waited time.Duration // since the first look
		want   time.Duration
	}{
		{0, ms},
		{3 * ms, ms},
		{4 * ms, ms},
		{8 * ms, 2 * ms},
		{14 * ms, 3500 * time.Microsecond},
		{40 * ms, 10 * ms},
		{80 * ms, 20 * ms},
		{20 * time.Second, 20 * ms},
	} {
		t.Run(tc.waited.String(), func(t *testing.T) {
			start := time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC)
			now := start
			b := backoff{now: func() time.Time { return now }}
			if got := b.next(); got != ms {
				t.Fatalf("first pause %s, want 1ms", got)
			}
			now = start.Add(tc.waited)
			if got := b.next(); got != tc.want {
				t.Fatalf("pause after %s = %s, want %s", tc.waited, got, tc.want)
			}
		})
	}
}

// TestMultipathdAnswerIsReused: within its TTL the answer of multipathd
// about itself is reused; a refusal under MultipathRequired is not, so the
// next call finds a daemon that has started meanwhile.
func TestMultipathdAnswerIsReused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mode   MultipathMode
		answer string
		want   bool
		wantOK bool
		runs   int // multipathd runs for three checks
	}{
		{"running", MultipathAuto, "pid 42 idle\n", true, true, 1},
		{"not running, auto", MultipathAuto, "error receiving packet\n", false, true, 1},
		{"not running, required", MultipathRequired, "error receiving packet\n", false, false, 3},
		{"disabled", MultipathDisabled, "pid 42 idle\n", false, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := &fakeExec{fn: func([]string) ([]byte, error) { return []byte(tc.answer), nil }}
			c := newTestClient(t, newFakeSys(t), ex, tc.mode)
			for i := 0; i < 3; i++ {
				got, err := c.multipathActive(context.Background())
				if got != tc.want || (err == nil) != tc.wantOK {
					t.Fatalf("check %d: %v, %v; want %v, ok %v", i, got, err, tc.want, tc.wantOK)
				}
			}
			if n := ex.called("multipathd show daemon"); n != tc.runs {
				t.Fatalf("%d multipathd runs, want %d", n, tc.runs)
			}
			// Past the TTL it asks again.
			c.mpUntil = time.Now().Add(-time.Second)
			c.multipathActive(context.Background())
			if n := ex.called("multipathd show daemon"); tc.mode != MultipathDisabled && n != tc.runs+1 {
				t.Fatalf("%d multipathd runs after the TTL, want %d", n, tc.runs+1)
			}
		})
	}
}

// TestAttachSharesTheTargetLock: an attach whose session exists scans
// under the shared target lock, beside other attaches; an exclusive holder
// (a login or a logout) keeps it waiting.
func TestAttachSharesTheTargetLock(t *testing.T) {
	for _, tc := range []struct {
		name      string
		exclusive bool
		wantOK    bool
	}{
		{"beside another attach", false, true},
		{"not during a logout", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSys(t)
			f.session(1)
			f.kernel(t, []int{1}, testSerial)
			ex := &fakeExec{fn: func(argv []string) ([]byte, error) {
				if strings.Join(argv, " ") == "iscsiadm -m session" {
					return sessionLines(1), nil
				}
				return nil, errors.New("unexpected call")
			}}
			c := newTestClient(t, f, ex, MultipathDisabled)
			lock := c.lockTargetShared
			if tc.exclusive {
				lock = c.lockTarget
			}
			unlock, err := lock(context.Background(), testIQN)
			if err != nil {
				t.Fatal(err)
			}
			defer unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			dev, err := c.Attach(ctx, testTarget())
			if (err == nil) != tc.wantOK {
				t.Fatalf("Attach: %+v, %v; want success %v\n%s", dev, err, tc.wantOK, ex.log())
			}
			if !tc.wantOK && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Attach failed with %v, want it to wait for the lock until the deadline", err)
			}
		})
	}
}
