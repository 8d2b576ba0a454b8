// Package keymutex gives one in-process mutex per key (a volume id, a
// snapshot name, an igroup): calls on different keys run concurrently,
// calls on one key one at a time. Across processes see internal/filelock.
package keymutex

import (
	"context"
	"sync"
)

// Mutex is a set of mutexes, one per key. The zero value is ready to use;
// a Mutex must not be copied after first use. A key that nobody holds or
// waits for takes no memory, so keys may come from requests.
type Mutex struct {
	mu   sync.Mutex
	keys map[string]*entry
}

// entry is one key's mutex. The token is a channel so that waiting can end
// with a context; refs counts holders and waiters, so that the last one out
// drops the entry.
type entry struct {
	token chan struct{}
	refs  int
}

// Lock waits until the caller holds key, or until ctx ends: then it returns
// ctx.Err(), also when ctx had ended before the call and the key is free.
// The returned unlock releases the key; calling it again does nothing.
func (m *Mutex) Lock(ctx context.Context, key string) (unlock func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e := m.ref(key)
	select {
	case e.token <- struct{}{}:
		return m.unlocker(key, e), nil
	case <-ctx.Done():
		m.unref(key, e)
		return nil, ctx.Err()
	}
}

// TryLock takes key if it is free and returns its unlock (idempotent, as
// Lock's); ok is false, and nothing held, when someone has it.
func (m *Mutex) TryLock(key string) (unlock func(), ok bool) {
	e := m.ref(key)
	select {
	case e.token <- struct{}{}:
		return m.unlocker(key, e), true
	default:
		m.unref(key, e)
		return nil, false
	}
}

func (m *Mutex) ref(key string) *entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.keys == nil {
		m.keys = map[string]*entry{}
	}
	e := m.keys[key]
	if e == nil {
		e = &entry{token: make(chan struct{}, 1)}
		m.keys[key] = e
	}
	e.refs++
	return e
}

func (m *Mutex) unref(key string, e *entry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.refs--; e.refs == 0 {
		delete(m.keys, key)
	}
}

func (m *Mutex) unlocker(key string, e *entry) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			<-e.token
			m.unref(key, e)
		})
	}
}
