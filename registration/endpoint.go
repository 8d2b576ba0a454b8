package registration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// socketPair is a socket for E and one for csi.sock (--csi_endpoint);
// either may be nil.
type socketPair struct {
	endpoint    *servedSocket // E
	csiEndpoint *servedSocket // csi.sock
}

// discard discards sockets that never became E or csi.sock.
func (p socketPair) discard() {
	for _, s := range []*servedSocket{p.endpoint, p.csiEndpoint} {
		if s != nil {
			s.discard()
		}
	}
}

// endpoints is this process's ownership of E and csi.sock (I3): the sockets
// it renamed onto them, which a successor may since have replaced (owned
// says whether they are still there), and the listeners a successor took
// over, closed after a delay.
type endpoints struct {
	socketPair
	orphans []orphan
}

type orphan struct {
	s     *servedSocket
	since time.Time
}

// serveOnTempSockets is Acquire step 1: serve CSI on temp sockets next to
// E and csi.sock unless this process still owns them, and check
// NodeGetInfo through E's socket (I6). Nothing is exposed yet.
func (m *Manager) serveOnTempSockets() (socketPair, NodeInfo, error) {
	var fresh socketPair
	var err error
	if !m.endpoints.endpoint.owned() {
		if fresh.endpoint, err = m.bindTemp(m.paths.endpoint); err != nil {
			return socketPair{}, NodeInfo{}, err
		}
	}
	if m.paths.csiEndpoint != "" && !m.endpoints.csiEndpoint.owned() {
		if fresh.csiEndpoint, err = m.bindTemp(m.paths.csiEndpoint); err != nil {
			m.log.WithError(err).Warn("cannot bind a socket for --csi_endpoint; continuing with E only")
		}
	}
	through := m.paths.endpoint
	if fresh.endpoint != nil {
		through = fresh.endpoint.path
	}
	ctx, cancel := context.WithTimeout(m.life, m.timings.nodeInfo)
	info, err := checkEndpoint(ctx, through)
	cancel()
	if err != nil {
		fresh.discard()
		return socketPair{}, NodeInfo{}, fmt.Errorf("CSI server not ready (I6): %w", err)
	}
	return fresh, info, nil
}

// bindTemp binds a temp socket next to target and serves CSI on it.
func (m *Manager) bindTemp(target string) (*servedSocket, error) {
	s, err := listenSocket(tempPathFor(target))
	if err != nil {
		return nil, fmt.Errorf("bind CSI socket next to %s: %w", target, err)
	}
	go func() {
		if err := m.cfg.Serve(s.lis); err != nil && !s.closed.Load() {
			m.log.WithError(err).WithField("socket", s.path).Warn("CSI server stopped serving a socket")
		}
	}()
	return s, nil
}

// checkEndpoint calls NodeGetInfo through the socket at path, as kubelet
// will. I6: a process exposes nothing before this succeeds, because a failing
// NodeGetInfo during RegisterPlugin makes kubelet drop the driver (K5).
func checkEndpoint(ctx context.Context, path string) (NodeInfo, error) {
	conn, err := grpc.NewClient("unix:"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return NodeInfo{}, err
	}
	defer conn.Close()
	resp, err := csi.NewNodeClient(conn).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return NodeInfo{}, fmt.Errorf("NodeGetInfo on %s: %w", path, err)
	}
	if resp.GetNodeId() == "" {
		// Kubelet's InstallCSIDriver refuses an empty node ID and then drops
		// the driver (K5).
		return NodeInfo{}, errors.New("NodeGetInfo returned an empty node id")
	}
	return NodeInfo{
		NodeID:            resp.GetNodeId(),
		Topology:          resp.GetAccessibleTopology().GetSegments(),
		MaxVolumesPerNode: resp.GetMaxVolumesPerNode(),
	}, nil
}

// takeOver is Acquire step 3, with handover.lock held: rename the temp
// sockets onto E and csi.sock (I3). From here on this process serves every
// new kubelet call. Only failing to take E fails the step; a csi.sock that
// cannot be taken is dropped from fresh.
func (m *Manager) takeOver(fresh *socketPair) error {
	if fresh.endpoint != nil {
		if err := fresh.endpoint.moveTo(m.paths.endpoint); err != nil {
			return fmt.Errorf("take over E: %w", err)
		}
	}
	if fresh.csiEndpoint != nil {
		if err := fresh.csiEndpoint.moveTo(m.paths.csiEndpoint); err != nil {
			m.log.WithError(err).Warn("cannot take over --csi_endpoint")
			fresh.csiEndpoint.discard()
			fresh.csiEndpoint = nil
		}
	}
	return nil
}

// adopt makes the sockets that took over E and csi.sock this process's, and
// orphans the ones they replaced.
func (es *endpoints) adopt(taken socketPair) {
	if taken.endpoint != nil {
		if es.endpoint != nil {
			es.orphan(es.endpoint)
		}
		es.endpoint = taken.endpoint
	}
	if taken.csiEndpoint != nil {
		if es.csiEndpoint != nil {
			es.orphan(es.csiEndpoint)
		}
		es.csiEndpoint = taken.csiEndpoint
	}
}

// orphan schedules closing a listener whose path a successor now owns. New
// connections can no longer reach it; the delay lets the server accept any
// connection kubelet made just before the rename. Calls in flight finish.
func (es *endpoints) orphan(s *servedSocket) {
	es.orphans = append(es.orphans, orphan{s: s, since: time.Now()})
}

// orphanLost orphans the sockets whose path a successor has taken over
// ("Superseded": E is no longer this process's, so it takes no new work).
func (es *endpoints) orphanLost() {
	for _, slot := range []**servedSocket{&es.endpoint, &es.csiEndpoint} {
		if s := *slot; s != nil && !s.owned() {
			es.orphan(s)
			*slot = nil
		}
	}
}

// reapOrphans closes the orphans that have drained for drain.
func (es *endpoints) reapOrphans(now time.Time, drain time.Duration) {
	es.orphans = slices.DeleteFunc(es.orphans, func(o orphan) bool {
		if now.Before(o.since.Add(drain)) {
			return false
		}
		o.s.close()
		return true
	})
}

// handedOver reports whether E is no longer this process's socket.
func (es *endpoints) handedOver() bool { return !es.endpoint.owned() }

// closeAll closes every listener, unlinking nothing (I7).
func (es *endpoints) closeAll() {
	for _, s := range []*servedSocket{es.endpoint, es.csiEndpoint} {
		if s != nil {
			s.close()
		}
	}
	for _, o := range es.orphans {
		o.s.close()
	}
	es.orphans = nil
}

// rebindLostEndpoints is the Watchdog's endpoint check: it re-binds E if it
// is no longer this holder's socket, and csi.sock if it is missing. A
// csi.sock that another process bound (a legacy Trident container) is left
// to it.
func (m *Manager) rebindLostEndpoints() {
	es := &m.endpoints
	if !es.endpoint.owned() {
		m.log.WithField("endpoint", m.paths.endpoint).Warn("E is missing or not this holder's socket; binding it again")
		if err := m.rebind(&es.endpoint, m.paths.endpoint); err != nil {
			m.logOnce(err, "cannot bind E again")
		}
	}
	if m.paths.csiEndpoint == "" {
		return
	}
	if es.csiEndpoint != nil && !es.csiEndpoint.owned() {
		es.orphan(es.csiEndpoint)
		es.csiEndpoint = nil
	}
	if _, err := os.Lstat(m.paths.csiEndpoint); errors.Is(err, os.ErrNotExist) {
		m.log.WithField("socket", m.paths.csiEndpoint).Info("--csi_endpoint socket is missing; binding it again")
		if err := m.rebind(&es.csiEndpoint, m.paths.csiEndpoint); err != nil {
			m.logOnce(err, "cannot bind --csi_endpoint again")
		}
	}
}

// rebind binds a fresh socket, checks NodeGetInfo through it (I6) and
// renames it onto target, under the lock and only while still the holder.
func (m *Manager) rebind(slot **servedSocket, target string) error {
	s, err := m.bindTemp(target)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(m.life, m.timings.nodeInfo)
	_, err = checkEndpoint(ctx, s.path)
	cancel()
	if err == nil {
		err = m.paths.withHandoverLock(func() error {
			if !m.paths.leaseNames(m.generations.current.g) {
				return errNotHolder
			}
			return s.moveTo(target)
		})
	}
	if err != nil {
		s.discard()
		return err
	}
	if *slot != nil {
		m.endpoints.orphan(*slot)
	}
	*slot = s
	return nil
}
