package ontap

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// lifTTL is how long a publish trusts the iSCSI data LIFs an earlier one
// read, sparing one request per publish. Trident reads its data LIFs once,
// when the backend starts; a few seconds old is fresher than that. A LIF
// that went down meanwhile costs the node one portal of several (it logs
// in to the others); a LIF list that matches none of the nodes reporting
// the LUN is read again at once.
const lifTTL = 30 * time.Second

// lifCache holds the SVM's iSCSI data LIFs as last read. Only this
// process's memory holds it: a restarted controller reads them again.
type lifCache struct {
	mu   sync.Mutex
	lifs []rest.LIF
	read time.Time
}

// now is time.Now; tests move it.
var now = time.Now

// iscsiLIFs returns the SVM's iSCSI data LIFs, from the cache unless fresh
// is set or the cache is older than lifTTL. cached tells which.
func (s *sanDriver) iscsiLIFs(ctx context.Context, fresh bool) (lifs []rest.LIF, cached bool, err error) {
	c := &s.lifs
	c.mu.Lock()
	defer c.mu.Unlock()
	if !fresh && c.lifs != nil && now().Sub(c.read) < lifTTL {
		return c.lifs, true, nil
	}
	lifs, err = s.client.DataLIFs(ctx, rest.ServiceDataISCSI)
	if err != nil {
		c.lifs = nil
		return nil, false, s.failure(err, "listing iSCSI data LIFs")
	}
	c.lifs, c.read = lifs, now()
	return lifs, false, nil
}

// portals are the up iSCSI LIFs on the nodes that report the LUN (SLM), as
// Trident publishes them: addresses without port. The nodes are read only
// if the map does not carry them (a map that existed before).
func (s *sanDriver) portals(ctx context.Context, m *rest.LUNMap) ([]string, error) {
	nodes := m.ReportingNodes
	if nodes == nil {
		var err error
		if nodes, err = s.client.LUNMapReportingNodes(ctx, m.LUNUUID, m.IgroupUUID); err != nil {
			return nil, s.failure(err, "reading the reporting nodes of the LUN map")
		}
	}
	lifs, cached, err := s.iscsiLIFs(ctx, false)
	if err != nil {
		return nil, err
	}
	out := upPortals(lifs, nodes)
	if len(out) == 0 && cached {
		if lifs, _, err = s.iscsiLIFs(ctx, true); err != nil {
			return nil, err
		}
		out = upPortals(lifs, nodes)
	}
	if len(out) == 0 {
		return nil, backends.Errorf(backends.ErrUnavailable, "no iSCSI data LIF is up on the nodes reporting the LUN (%v)", nodes)
	}
	return out, nil
}

// upPortals are the addresses of the LIFs that are up on one of nodes (on
// any node when nodes is empty).
func upPortals(lifs []rest.LIF, nodes []string) []string {
	var out []string
	for _, l := range lifs {
		if l.State == "up" && (len(nodes) == 0 || slices.Contains(nodes, l.CurrentNode)) {
			out = append(out, l.Address)
		}
	}
	return out
}
