package harness

import (
	"fmt"
	"testing"
)

// Guard runs fn, which hands t to kubelet test helpers that report failure
// with t.Fatalf, and turns such a failure into an error. Outside tests t is
// nil: fn then gets a bare testing.T, whose Fatalf panics or exits the
// goroutine, and Guard recovers from both. Kubelet's fake volume hosts take a
// *testing.T only to fail through it.
func Guard(t *testing.T, fn func(*testing.T)) (err error) {
	if t == nil {
		t = new(testing.T)
	}
	done := make(chan error, 1)
	go func() {
		completed := false
		defer func() {
			switch r := recover(); {
			case r != nil:
				done <- fmt.Errorf("kubelet helper failed: %v", r)
			case !completed:
				done <- fmt.Errorf("kubelet helper failed the test (see the log above)")
			default:
				done <- nil
			}
		}()
		fn(t)
		completed = true
	}()
	return <-done
}
