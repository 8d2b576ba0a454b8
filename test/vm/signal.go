package vm

import (
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

// terminating is set once the test process got SIGINT or SIGTERM: the runs
// it kills are not failures worth keeping logs of.
var terminating atomic.Bool

func installSignalHandler() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		terminating.Store(true)
		killAll()
		signal.Reset(sig.(syscall.Signal))
		_ = syscall.Kill(os.Getpid(), sig.(syscall.Signal))
	}()
}
