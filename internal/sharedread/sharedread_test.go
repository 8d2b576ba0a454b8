package sharedread

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Calls that do not overlap each run fn, and get its error.
func TestCallsAloneEachRun(t *testing.T) {
	var runs atomic.Int32
	boom := errors.New("boom")
	r := New(func() (int32, error) {
		n := runs.Add(1)
		if n == 2 {
			return n, boom
		}
		return n, nil
	})
	for want := int32(1); want <= 3; want++ {
		v, err := r.Get()
		if v != want || (err != nil) != (want == 2) {
			t.Fatalf("call %d: %d, %v", want, v, err)
		}
	}
}

// Callers that come while a run is under way share the next run, which
// starts after they came: ten callers, two runs.
func TestCallersDuringARunShareTheNext(t *testing.T) {
	var runs atomic.Int32
	started, release := make(chan int32, 2), make(chan struct{})
	r := New(func() (int32, error) {
		n := runs.Add(1)
		started <- n
		<-release
		return n, nil
	})
	first := make(chan int32)
	go func() { v, _ := r.Get(); first <- v }()
	<-started // run 1 is under way
	const callers = 10
	var wg sync.WaitGroup
	got := make([]int32, callers)
	for i := range callers {
		wg.Go(func() { got[i], _ = r.Get() })
	}
	waitQueued(t, r, callers)
	close(release)
	if v := <-first; v != 1 {
		t.Fatalf("first caller got run %d, want 1", v)
	}
	wg.Wait()
	for i, v := range got {
		if v != 2 {
			t.Fatalf("caller %d got run %d, want 2 (started after it came)", i, v)
		}
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("%d runs, want 2", n)
	}
}

// waitQueued waits until n callers wait for the next run.
func waitQueued(t *testing.T, r *Read[int32], n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		r.mu.Lock()
		queued := r.next != nil && r.next.calls == n
		r.mu.Unlock()
		if queued {
			return
		}
	}
	t.Fatalf("%d callers did not come to wait for the next run", n)
}

// No caller ever gets a value read before its call: each caller sets the
// state, then reads it back through Get, many at once.
func TestNoCallerGetsAnOlderRead(t *testing.T) {
	var state atomic.Int64
	var runs atomic.Int32
	r := New(func() (int64, error) {
		runs.Add(1)
		return state.Load(), nil
	})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 500 {
				mine := state.Add(1)
				v, _ := r.Get()
				if v < mine {
					t.Errorf("goroutine %d call %d: got %d, set %d before the call", g, i, v, mine)
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d calls, %d runs", 16*500, runs.Load())
}

// A run that panics gives the callers that shared it an error, not a
// zero value as if read, and leaves no caller of the next run waiting.
func TestAPanicGivesItsCallersAnError(t *testing.T) {
	var runs atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	r := New(func() (int32, error) {
		switch runs.Add(1) {
		case 1:
			close(started)
			<-release
			return 1, nil
		case 2:
			panic("boom")
		}
		return 3, nil
	})
	go func() { _, _ = r.Get() }()
	<-started // run 1 is under way; run 2, which panics, is next
	type result struct {
		v   int32
		err error
	}
	shared := make(chan result, 2)
	get := func() {
		defer func() { _ = recover() }() // the caller that runs it panics
		v, err := r.Get()
		shared <- result{v, err}
	}
	go get()
	go get()
	waitQueued(t, r, 2)
	close(release)
	got := <-shared // the caller that did not run it; the other panicked
	if !errors.Is(got.err, errPanicked) {
		t.Fatalf("a caller of the run that panicked got %d, %v; want errPanicked", got.v, got.err)
	}
	if v, err := r.Get(); v != 3 || err != nil {
		t.Fatalf("the run after: %d, %v; want 3", v, err)
	}
}
