package registration

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// retirer retires registration sockets: rename to a dot-name, wait, unlink.
// Kubelet ignores the rename (IN_MOVED_FROM) and the dot-name's Create (K1),
// so a registered socket leaves REG_DIR without a deregistration (I2). The
// wait keeps kubelet from logging a stat error for the dot-name's Create.
type retirer struct {
	delay time.Duration
	log   *logrus.Entry
	wg    sync.WaitGroup
}

// retire renames dir/name away. It reports false if the socket was already
// gone.
func (r *retirer) retire(dir, name string) (bool, error) {
	from := filepath.Join(dir, name)
	to := filepath.Join(dir, retiredPrefix+name)
	if err := os.Rename(from, to); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	r.log.WithField("socket", from).Info("retired registration socket")
	r.wg.Add(1)
	time.AfterFunc(r.delay, func() {
		defer r.wg.Done()
		if err := os.Remove(to); err != nil && !errors.Is(err, os.ErrNotExist) {
			r.log.WithError(err).Warn("cannot remove retired registration socket")
		}
	})
	return true, nil
}

// wait returns once every retired socket has been unlinked.
func (r *retirer) wait() { r.wg.Wait() }

// retire retires gen's registration socket if it is still on disk as ours.
func (m *Manager) retire(gen *generation) {
	if gen.reg == nil || gen.retired || !gen.reg.sock.owned() {
		return
	}
	if _, err := m.retirer.retire(m.paths.regDir, gen.reg.name); err != nil {
		m.log.WithError(err).Warn("cannot retire registration socket")
		return
	}
	gen.retired = true
}

// sweepRegDir is the registered holder's retirement of every other
// registration socket of this driver (Acquire step 6, "Garbage collection",
// "Legacy registrar socket"): older generations, dead or alive, and the
// legacy <driver>-reg.sock. Sockets of newer generations belong to a
// successor and are left alone.
func (m *Manager) sweepRegDir() {
	ents, err := os.ReadDir(m.paths.regDir)
	if err != nil {
		m.logOnce(err, "cannot list the registration dir")
		return
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") || e.Type()&fs.ModeSocket == 0 {
			continue
		}
		kind, g := m.paths.parseRegName(name)
		if kind == kindLegacy || (kind == kindGeneration && g < m.generations.current.g) {
			m.retireByName(name, g)
		}
	}
}

func (m *Manager) retireByName(name string, g uint64) {
	if _, err := m.retirer.retire(m.paths.regDir, name); err != nil {
		m.log.WithError(err).WithField("socket", name).Warn("cannot retire registration socket")
		return
	}
	m.generations.markRetired(name, g)
}
