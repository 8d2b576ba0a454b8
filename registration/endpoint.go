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

type orphan struct {
	s       *servedSocket
	closeAt time.Time
}

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

// probeNodeInfo calls NodeGetInfo through the socket at path, as kubelet
// will. I6: a process exposes nothing before this succeeds, because a failing
// NodeGetInfo during RegisterPlugin makes kubelet drop the driver (K5).
func probeNodeInfo(ctx context.Context, path string) (NodeInfo, error) {
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

// orphan schedules closing a listener whose path a successor now owns. New
// connections can no longer reach it; the delay lets the server accept any
// connection kubelet made just before the rename. Calls in flight finish.
func (m *Manager) orphan(s *servedSocket) {
	m.orphans = append(m.orphans, orphan{s: s, closeAt: time.Now().Add(m.t.drainDelay)})
}

func (m *Manager) reapOrphans(now time.Time) {
	m.orphans = slices.DeleteFunc(m.orphans, func(o orphan) bool {
		if now.Before(o.closeAt) {
			return false
		}
		o.s.close()
		return true
	})
}

// checkEndpoints re-binds E if it is no longer this holder's socket, and
// csi.sock if it is missing. A csi.sock that another process bound (a legacy
// Trident container) is left to it.
func (m *Manager) checkEndpoints() {
	if m.e == nil || !m.e.owned() {
		m.log.WithField("endpoint", m.lay.endpoint).Warn("E is missing or not this holder's socket; binding it again")
		if err := m.rebind(&m.e, m.lay.endpoint); err != nil {
			m.logOnce(err, "cannot bind E again")
		}
	}
	if m.lay.csiEndpoint == "" {
		return
	}
	if m.c != nil && !m.c.owned() {
		m.orphan(m.c)
		m.c = nil
	}
	if _, err := os.Lstat(m.lay.csiEndpoint); errors.Is(err, os.ErrNotExist) {
		m.log.WithField("socket", m.lay.csiEndpoint).Info("--csi_endpoint socket is missing; binding it again")
		if err := m.rebind(&m.c, m.lay.csiEndpoint); err != nil {
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
	ctx, cancel := context.WithTimeout(m.life, m.t.nodeInfo)
	_, err = probeNodeInfo(ctx, s.path)
	cancel()
	if err == nil {
		err = m.lay.withHandoverLock(func() error {
			l, err := readLease(m.lay.leasePath())
			if err != nil || l == nil || l.Generation != m.cur.g {
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
		m.orphan(*slot)
	}
	*slot = s
	return nil
}
