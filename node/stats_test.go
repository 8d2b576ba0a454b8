package node

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestStatWithContextLeavesOneCallBehind: a stat blocked in the kernel (a
// hung NFS server) returns when its context ends; while it stays blocked,
// stats of the same path fail at once without another call, and once it
// returns they run again.
func TestStatWithContextLeavesOneCallBehind(t *testing.T) {
	release := make(chan struct{})
	calls := 0
	blocked := func() error { calls++; <-release; return nil }
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := statWithContext(ctx, "/hung", blocked); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocked stat: %v, want a deadline", err)
	}
	if err := statWithContext(context.Background(), "/hung", blocked); !errors.Is(err, errStillHung) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second stat of a hung path: %v, want errStillHung", err)
	}
	if err := statWithContext(context.Background(), "/other", func() error { return nil }); err != nil {
		t.Fatalf("another path: %v", err)
	}
	close(release)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, still := hungStats.Load("/hung"); !still {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the path stays marked hung after its stat returned")
		}
	}
	if err := statWithContext(context.Background(), "/hung", func() error { return nil }); err != nil || calls != 1 {
		t.Fatalf("stat after the hung one returned: %v (blocked calls %d, want 1)", err, calls)
	}
}
