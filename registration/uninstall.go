package registration

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ontap-csi/ontap-csi/internal/filelock"

	"github.com/sirupsen/logrus"
)

// uninstall is the holder's part of "Uninstall": unlink its registration
// socket so kubelet deregisters the driver and removes its CSINode entry,
// and stop re-registering.
func (m *Manager) uninstall() {
	m.cancelTimers()
	if cur := m.generations.current; !cur.deregistered {
		m.deregister(cur, "the node is being uninstalled (ontap-csi deregister)")
	}
	m.setRole(roleUninstalling)
	m.published.ready.Store(false)
}

// deregister unlinks gen's registration socket: I2's one exception, an
// explicit deregistration. Kubelet sees the Remove and deregisters the
// driver by name (K4), as after node-driver-registrar's SIGTERM.
func (m *Manager) deregister(gen *generation, why string) {
	gen.deregistered = true
	if gen.reg == nil || gen.retired || !gen.reg.sock.owned() {
		return
	}
	if err := os.Remove(gen.reg.sock.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		m.log.WithError(err).Error("cannot remove the registration socket to deregister")
		return
	}
	gen.retired = true
	m.log.WithFields(logrus.Fields{"generation": gen.g, "socket": gen.reg.hostPath, "why": why}).
		Warn("removed the registration socket: kubelet deregisters the driver")
}

// DeregisterResult reports what Deregister did.
type DeregisterResult struct {
	// Generation is the lease's generation when it was marked uninstalling.
	Generation  uint64 `json:"generation"`
	HolderPod   string `json:"holderPod,omitempty"`
	HolderAlive bool   `json:"holderAlive"`
	// ByHolder: the live holder removed its own registration socket.
	ByHolder bool `json:"deregisteredByHolder"`
	// Unlinked are the registration sockets Deregister removed itself
	// (no live holder did it); each removal makes kubelet deregister.
	Unlinked []string `json:"unlinked,omitempty"`
	// Retired are leftover sockets renamed away without a deregistration,
	// after the holder had deregistered.
	Retired []string `json:"retired,omitempty"`
}

// Deregister is `ontap-csi deregister`, the uninstall path ("Uninstall"):
// mark the lease uninstalling, so the holder removes its registration socket
// (kubelet then deregisters the driver and removes its CSINode entry) and
// nothing re-registers until a new process starts. If no live holder does
// so before ctx ends, Deregister removes the registration sockets itself.
func Deregister(ctx context.Context, pluginDir, regDir, driver string) (*DeregisterResult, error) {
	lay := newLayout(driver, "/", pluginDir, regDir, "")
	if !isDir(pluginDir) {
		return nil, fmt.Errorf("plugin dir %s does not exist (see --plugin-dir, --host-root)", pluginDir)
	}
	if !isDir(regDir) {
		return nil, fmt.Errorf("registration dir %s does not exist (see --registration-dir, --host-root)", regDir)
	}
	log := logrus.WithFields(logrus.Fields{"component": "registration", "driver": driver})

	lease, own, err := markUninstalling(lay)
	if err != nil {
		return nil, err
	}
	res := &DeregisterResult{Generation: lease.Generation, HolderPod: lease.Holder.Pod}
	if res.HolderAlive, err = filelock.Locked(lay.alivePath(lease.Generation)); err != nil {
		return nil, err
	}

	// Wait for the holder to remove its socket.
	if res.HolderAlive && own != "" {
		res.ByHolder = waitGone(ctx, own, lay.alivePath(lease.Generation))
	}
	if err := removeRegistrationSockets(lay, res, log); err != nil {
		return nil, err
	}
	return res, nil
}

// markUninstalling marks the lease uninstalling, under handover.lock. own is
// the holder's registration socket if it was on disk before the mark.
func markUninstalling(lay layout) (lease *Lease, own string, err error) {
	err = lay.withHandoverLock(func() error {
		l, err := readLease(lay.leasePath())
		if err != nil && !errors.Is(err, errCorruptLease) {
			return err
		}
		if l == nil {
			// Name the newest generation on disk, so the holder, if any,
			// recognises the mark as meant for it.
			g, err := lay.maxGenerationOnDisk()
			if err != nil {
				return err
			}
			l = &Lease{Generation: g}
		}
		if l.RegistrationSocket != "" {
			if p := filepath.Join(lay.regDir, filepath.Base(l.RegistrationSocket)); isSocket(p) {
				own = p
			}
		}
		l.Phase, l.UpdatedAt = PhaseUninstalling, time.Now()
		lease = l
		return writeLease(lay.leasePath(), l)
	})
	return lease, own, err
}

// removeRegistrationSockets removes this driver's registration sockets
// from REG_DIR and records them in res: retired if the holder has already
// deregistered (res.ByHolder), else unlinked.
func removeRegistrationSockets(lay layout, res *DeregisterResult, log *logrus.Entry) error {
	rt := &retirer{delay: defaultTimings.retireDelay, log: log}
	ents, err := os.ReadDir(lay.regDir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		name, p := e.Name(), filepath.Join(lay.regDir, e.Name())
		if strings.HasPrefix(name, ".") || e.Type()&fs.ModeSocket == 0 {
			continue
		}
		if k, _ := lay.parseRegName(name); k == kindForeign {
			continue
		}
		if res.ByHolder {
			// Kubelet has already dropped the driver; a rename away makes
			// no second deregistration (K1).
			if ok, err := rt.retire(lay.regDir, name); err != nil {
				return err
			} else if ok {
				res.Retired = append(res.Retired, p)
			}
			continue
		}
		// No live holder did it: this is the explicit deregistration, I2's
		// one exception. Kubelet deregisters for any of these it holds (K4).
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		log.WithField("socket", p).Info("removed registration socket")
		res.Unlinked = append(res.Unlinked, p)
	}
	rt.wait()
	return nil
}

// waitGone waits until path is gone (true), or its holder's lock at alive is
// free, or ctx ends (false).
func waitGone(ctx context.Context, path, alive string) bool {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			return true
		}
		if held, _ := filelock.Locked(alive); !held {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}
