package controller

import "sync"

// keyLocks serializes operations on one volume or name within this process.
// A call that finds its key busy is answered Aborted at once instead of
// queueing: the CO retries, and a queue of stale retries behind a slow
// ONTAP job would only grow. Across replicas the sidecars' leader election
// keeps one controller active.
type keyLocks struct {
	mu   sync.Mutex
	held map[string]struct{}
}

// tryLock takes key if it is free and returns the function releasing it.
func (l *keyLocks) tryLock(key string) (unlock func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, busy := l.held[key]; busy {
		return nil, false
	}
	l.held[key] = struct{}{}
	return func() {
		l.mu.Lock()
		delete(l.held, key)
		l.mu.Unlock()
	}, true
}

// Lock keys: a volume's ID and a snapshot's name live in separate spaces.
func volumeKey(id string) string     { return "volume " + id }
func snapshotKey(name string) string { return "snapshot " + name }
