package registration

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ontap-csi/ontap-csi/internal/filelock"

	"github.com/sirupsen/logrus"
)

// staleAfter is how old a leftover must be before garbage collection takes
// it: well past any step that leaves a temp file for a moment.
const staleAfter = 30 * time.Second

// collectGarbage removes what dead processes left behind. It runs with
// handover.lock held, after a registration and now and then on the holder:
//   - g<X>.alive whose lock is free (X != own);
//   - temp sockets nobody listens on, and lease temp files;
//   - retired registration sockets whose unlink never came (the retiring
//     process died within the delay);
//   - staging dot-names of registration sockets of dead generations.
//
// It never unlinks a non-dot name in REG_DIR (I2).
func (l layout) collectGarbage(own uint64, log *logrus.Entry) {
	now := time.Now()
	stale := func(p string) bool {
		age, ok := changedAgo(p, now)
		return ok && age > staleAfter
	}
	remove := func(p, what string) {
		if err := os.Remove(p); err == nil {
			log.WithField("path", p).Debugf("removed %s", what)
		} else if !errors.Is(err, os.ErrNotExist) {
			log.WithError(err).WithField("path", p).Warnf("cannot remove %s", what)
		}
	}

	dirs := []string{l.pluginDir}
	if l.csiEndpoint != "" && filepath.Dir(l.csiEndpoint) != l.pluginDir {
		dirs = append(dirs, filepath.Dir(l.csiEndpoint))
	}
	for i, dir := range dirs {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			name, p := e.Name(), filepath.Join(dir, e.Name())
			switch g, isAlive := parseAliveName(name); {
			case i == 0 && isAlive && g != own:
				removeIfUnlocked(p, log)
			case isTempSocketName(name) && stale(p) && !isListening(p):
				remove(p, "stale temp socket")
			case i == 0 && strings.HasPrefix(name, leaseTempPrefix) && stale(p):
				remove(p, "stale lease temp file")
			}
		}
	}

	ents, _ := os.ReadDir(l.regDir)
	for _, e := range ents {
		name, p := e.Name(), filepath.Join(l.regDir, e.Name())
		if !strings.HasPrefix(name, ".") {
			continue // I2
		}
		if rest, ok := strings.CutPrefix(name, retiredPrefix); ok {
			if k, _ := l.parseRegName(rest); k != kindForeign && stale(p) {
				remove(p, "retired registration socket")
			}
			continue
		}
		if g, ok := l.generationOfRegFile(name); ok && g != own && stale(p) {
			if alive, err := filelock.Locked(l.alivePath(g)); err == nil && !alive {
				remove(p, "staging registration socket of a dead generation")
			}
		}
	}
}

// removeIfUnlocked removes a g<X>.alive file whose generation is dead. It
// unlinks while holding the lock, so no process can be locking the file at
// that moment.
func removeIfUnlocked(path string, log *logrus.Entry) {
	lock, err := filelock.TryAcquire(path, filelock.Exclusive)
	if err != nil {
		return // alive, gone, or checked by `ontap-csi status` right now
	}
	defer lock.Release()
	if err := lock.Remove(); err == nil {
		log.WithField("path", path).Debug("removed lock of a dead generation")
	}
}

// collectGarbage is the holder's "Garbage collection", under handover.lock.
func (m *Manager) collectGarbage() {
	m.watch.lastGC = time.Now()
	err := m.paths.withHandoverLock(func() error {
		m.paths.collectGarbage(m.generations.current.g, m.log)
		return nil
	})
	if err != nil {
		m.log.WithError(err).Warn("garbage collection skipped")
	}
}
