package vm

import (
	"os"
	"os/signal"
	"syscall"
)

func installSignalHandler() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		killAll()
		signal.Reset(sig.(syscall.Signal))
		_ = syscall.Kill(os.Getpid(), sig.(syscall.Signal))
	}()
}
