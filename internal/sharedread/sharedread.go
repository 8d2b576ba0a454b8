// Package sharedread lets calls that overlap share one run of a read,
// without any of them getting a result older than its own call.
//
// A node at concurrency runs the same reads side by side: twenty
// unstages at once each read the mount table and every volume's tracking
// file. Under load each such read waited for the CPU the others used
// (issue 18, docs/benchmarks.md). A cache would need an invalidation the
// kernel's mount table does not offer; this needs none, because a caller
// only ever gets a run that started after it asked, which sees every
// change that finished before the call, exactly as its own read would.
package sharedread

import (
	"errors"
	"sync"
)

// Read shares runs of fn among its callers. The zero value is not usable:
// make one with New.
type Read[T any] struct {
	fn func() (T, error)

	mu   sync.Mutex
	cur  *run[T] // the run under way, nil if none
	next *run[T] // the run that starts when cur ends; its callers wait
}

type run[T any] struct {
	start chan struct{} // closed when the run may start (next runs only)
	done  chan struct{} // closed when v and err are set
	v     T
	err   error
	calls int // callers of this run
}

// New returns a Read of fn. fn must return, and callers must treat what
// it returns as read-only: every caller of a run gets the same value.
func New[T any](fn func() (T, error)) *Read[T] {
	return &Read[T]{fn: fn}
}

// Get returns the result of a run of fn that started after Get was
// called: the run it starts itself when none is under way, or else the
// next one, which starts as soon as the one under way ends and serves
// every caller that came meanwhile.
func (r *Read[T]) Get() (T, error) {
	r.mu.Lock()
	if r.cur == nil {
		rn := &run[T]{done: make(chan struct{}), calls: 1}
		r.cur = rn
		r.mu.Unlock()
		r.do(rn)
		return rn.v, rn.err
	}
	rn, lead := r.next, false
	if rn == nil {
		rn = &run[T]{start: make(chan struct{}), done: make(chan struct{})}
		r.next, lead = rn, true
	}
	rn.calls++
	r.mu.Unlock()
	if lead {
		<-rn.start
		r.do(rn)
	} else {
		<-rn.done
	}
	return rn.v, rn.err
}

// errPanicked is what the other callers of a run get when fn panicked in
// it (the panic goes on in the caller that ran it).
var errPanicked = errors.New("the shared read panicked")

// do runs fn for rn, then starts the next run, if a caller is waiting;
// also if fn panics, so that no caller is left waiting, nor given a zero
// value as if it had been read.
func (r *Read[T]) do(rn *run[T]) {
	ok := false
	defer func() {
		if !ok {
			rn.err = errPanicked
		}
		close(rn.done)
		r.mu.Lock()
		r.cur, r.next = r.next, nil
		if r.cur != nil {
			close(r.cur.start)
		}
		r.mu.Unlock()
	}()
	rn.v, rn.err = r.fn()
	ok = true
}
