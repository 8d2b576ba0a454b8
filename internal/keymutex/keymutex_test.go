package keymutex

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// Concurrent read-modify-writes of one counter per key give the right totals
// (and -race stays quiet) only if each key's lock excludes.
func TestLockExcludesPerKey(t *testing.T) {
	var m Mutex
	const goroutines, rounds = 8, 100
	counts := map[string]*int{"a": new(int), "b": new(int)}
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				key := []string{"a", "b"}[i%2]
				unlock, err := m.Lock(context.Background(), key)
				if err != nil {
					t.Error(err)
					return
				}
				n := *counts[key]
				time.Sleep(time.Microsecond)
				*counts[key] = n + 1
				unlock()
			}
		}()
	}
	wg.Wait()
	if *counts["a"] != goroutines*rounds/2 || *counts["b"] != goroutines*rounds/2 {
		t.Fatalf("a=%d b=%d, want %d each: a key's lock let two holders in", *counts["a"], *counts["b"], goroutines*rounds/2)
	}
	if len(m.keys) != 0 {
		t.Fatalf("%d keys left after every holder left", len(m.keys))
	}
}

func TestTryLock(t *testing.T) {
	var m Mutex
	unlockA, ok := m.TryLock("a")
	if !ok {
		t.Fatal("TryLock of a free key failed")
	}
	if _, ok := m.TryLock("a"); ok {
		t.Fatal("TryLock of a held key succeeded")
	}
	unlockB, ok := m.TryLock("b")
	if !ok {
		t.Fatal("keys are not independent")
	}
	unlockB()
	unlockA()
	again, ok := m.TryLock("a")
	if !ok {
		t.Fatal("TryLock after unlock failed")
	}
	again()
	if len(m.keys) != 0 {
		t.Fatalf("%d keys left", len(m.keys))
	}
}

func TestLockEndsWithItsContext(t *testing.T) {
	var m Mutex
	unlock, err := m.Lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := m.Lock(ctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock of a held key: %v, want DeadlineExceeded", err)
	}
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if _, err := m.Lock(done, "free"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock with an ended context: %v, want Canceled even for a free key", err)
	}
	unlock()
	if len(m.keys) != 0 {
		t.Fatalf("%d keys left after a cancelled waiter", len(m.keys))
	}
}

func TestWaiterGetsTheKeyWhenReleased(t *testing.T) {
	var m Mutex
	unlock, _ := m.TryLock("a")
	got := make(chan func())
	go func() {
		u, err := m.Lock(context.Background(), "a")
		if err != nil {
			t.Error(err)
		}
		got <- u
	}()
	select {
	case <-got:
		t.Fatal("waiter got a held key")
	case <-time.After(20 * time.Millisecond):
	}
	unlock()
	(<-got)()
}

// A second unlock must not release the key from its next holder.
func TestUnlockIsIdempotent(t *testing.T) {
	var m Mutex
	first, _ := m.TryLock("a")
	first()
	second, ok := m.TryLock("a")
	if !ok {
		t.Fatal("key not free after unlock")
	}
	first()
	if _, ok := m.TryLock("a"); ok {
		t.Fatal("a repeated unlock released the next holder's key")
	}
	second()
}
