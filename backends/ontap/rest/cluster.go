package rest

import (
	"context"
	"fmt"
	"net/url"
)

// version is an ONTAP release, e.g. 9.15.1.
type version struct {
	Generation, Major, Minor int
	Full                     string // "NetApp Release 9.15.1: ..."
}

func (v version) String() string { return fmt.Sprintf("%d.%d.%d", v.Generation, v.Major, v.Minor) }

// atLeast reports whether v is generation.major.minor or later.
func (v version) atLeast(generation, major, minor int) bool {
	if v.Generation != generation {
		return v.Generation > generation
	}
	if v.Major != major {
		return v.Major > major
	}
	return v.Minor >= minor
}

// clusterInfo identifies the ONTAP cluster.
type clusterInfo struct {
	Name    string
	UUID    string
	Version version
}

// cluster returns the cluster's name and version (GET /cluster).
func (c *Client) cluster(ctx context.Context) (*clusterInfo, error) {
	var w struct {
		Name    string `json:"name"`
		UUID    string `json:"uuid"`
		Version struct {
			Full       string `json:"full"`
			Generation int    `json:"generation"`
			Major      int    `json:"major"`
			Minor      int    `json:"minor"`
		} `json:"version"`
	}
	if err := c.get(ctx, "/cluster", "/cluster", url.Values{"fields": {"name,uuid,version"}}, &w); err != nil {
		return nil, err
	}
	return &clusterInfo{Name: w.Name, UUID: w.UUID, Version: version{
		Generation: w.Version.Generation, Major: w.Version.Major, Minor: w.Version.Minor, Full: w.Version.Full,
	}}, nil
}

// Version returns the cluster's ONTAP release, e.g. "9.19.1".
func (c *Client) Version(ctx context.Context) (string, error) {
	ci, err := c.cluster(ctx)
	if err != nil {
		return "", err
	}
	return ci.Version.String(), nil
}

// LargeVolumes reports whether the cluster has large volumes
// (space.large_size_enabled: FlexVols up to 300 TiB, files and so LUNs over
// 16 TiB), which come with ONTAP 9.12.1 (docs/design/ontap-rest.md §4.2), and
// the cluster's version.
func (c *Client) LargeVolumes(ctx context.Context) (bool, string, error) {
	return c.versionAtLeast(ctx, 9, 12, 1)
}

// SupportsBalancedPlacement reports whether ONTAP can place a new volume
// itself (POST /application/containers, ONTAP 9.19.1+, which Trident's
// useBalancedPlacement needs), and the release it read.
func (c *Client) SupportsBalancedPlacement(ctx context.Context) (bool, string, error) {
	return c.versionAtLeast(ctx, 9, 19, 1)
}

func (c *Client) versionAtLeast(ctx context.Context, gen, major, minor int) (bool, string, error) {
	ci, err := c.cluster(ctx)
	if err != nil {
		return false, "", err
	}
	return ci.Version.atLeast(gen, major, minor), ci.Version.String(), nil
}

// SVM is the configured storage VM.
type SVM struct {
	UUID       string
	Name       string
	State      string // "running" when usable
	Aggregates []SVMAggregate
}

// SVMAggregate is an aggregate assigned to the SVM, as the SVM sees it. It is
// the space source that works with SVM-scoped credentials (vsadmin).
type SVMAggregate struct {
	Name          string
	UUID          string
	AvailableSize int64
	State         string
	Type          string // hdd, hybrid, ssd, ...
}

// SVM looks up the configured SVM by name and returns its state and
// aggregates. NotFound if no such SVM is visible.
func (c *Client) SVM(ctx context.Context) (*SVM, error) {
	uuid, err := c.svm(ctx)
	if err != nil {
		return nil, err
	}
	var w struct {
		UUID       string `json:"uuid"`
		Name       string `json:"name"`
		State      string `json:"state"`
		Aggregates []struct {
			Name          string `json:"name"`
			UUID          string `json:"uuid"`
			AvailableSize int64  `json:"available_size"`
			State         string `json:"state"`
			Type          string `json:"type"`
		} `json:"aggregates"`
	}
	if err := c.get(ctx, "/svm/svms/{uuid}", "/svm/svms/"+url.PathEscape(uuid), nil, &w); err != nil {
		return nil, err
	}
	svm := &SVM{UUID: w.UUID, Name: w.Name, State: w.State}
	for _, a := range w.Aggregates {
		svm.Aggregates = append(svm.Aggregates, SVMAggregate(a))
	}
	return svm, nil
}

// Aggregate is a cluster aggregate with its space figures in bytes.
type Aggregate struct {
	UUID      string
	Name      string
	Node      string
	State     string
	Size      int64 // usable size
	Used      int64 // including volume guarantees
	Available int64
	Footprint int64 // sum of volume footprints
	DiskType  string
}

// Aggregate returns one aggregate by name (GET /storage/aggregates?name=).
// It is cluster-scoped: SVM-scoped users may get an Auth error, and should
// use SVM().Aggregates instead.
func (c *Client) Aggregate(ctx context.Context, name string) (*Aggregate, error) {
	type wire struct {
		UUID  string `json:"uuid"`
		Name  string `json:"name"`
		State string `json:"state"`
		Node  struct {
			Name string `json:"name"`
		} `json:"node"`
		Space struct {
			Footprint    int64 `json:"footprint"`
			BlockStorage struct {
				Size      int64 `json:"size"`
				Used      int64 `json:"used"`
				Available int64 `json:"available"`
			} `json:"block_storage"`
		} `json:"space"`
		BlockStorage struct {
			Primary struct {
				DiskType string `json:"disk_type"`
			} `json:"primary"`
		} `json:"block_storage"`
	}
	q := url.Values{
		"fields": {"uuid,name,state,node.name,space.footprint,space.block_storage.size,space.block_storage.used,space.block_storage.available,block_storage.primary.disk_type"},
	}
	if err := literalQuery(q, "name", name); err != nil {
		return nil, err
	}
	recs, err := list[wire](ctx, c, "/storage/aggregates", "/storage/aggregates", q)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, notFound("/storage/aggregates", "aggregate", name)
	}
	w := recs[0]
	return &Aggregate{
		UUID: w.UUID, Name: w.Name, Node: w.Node.Name, State: w.State,
		Size: w.Space.BlockStorage.Size, Used: w.Space.BlockStorage.Used, Available: w.Space.BlockStorage.Available,
		Footprint: w.Space.Footprint, DiskType: w.BlockStorage.Primary.DiskType,
	}, nil
}

// node is a cluster node.
type node struct {
	UUID         string
	Name         string
	SerialNumber string
}

// nodes lists the cluster's nodes (GET /cluster/nodes).
func (c *Client) nodes(ctx context.Context) ([]node, error) {
	type wire struct {
		UUID         string `json:"uuid"`
		Name         string `json:"name"`
		SerialNumber string `json:"serial_number"`
	}
	recs, err := list[wire](ctx, c, "/cluster/nodes", "/cluster/nodes", url.Values{"fields": {"uuid,name,serial_number"}})
	if err != nil {
		return nil, err
	}
	nodes := make([]node, 0, len(recs))
	for _, w := range recs {
		nodes = append(nodes, node(w))
	}
	return nodes, nil
}

// Data LIF services (docs/design/ontap-rest.md §3.4).
const (
	ServiceDataNFS   = "data_nfs"
	ServiceDataISCSI = "data_iscsi"
)

// LIF is a network interface of the SVM.
type LIF struct {
	UUID        string
	Name        string
	Address     string // IP address, no prefix length
	State       string // "up" or "down"
	HomeNode    string
	CurrentNode string
	Services    []string
}

// DataLIFs lists the SVM's interfaces that offer service (ServiceDataNFS or
// ServiceDataISCSI), whatever their state: callers normally keep those with
// State "up".
func (c *Client) DataLIFs(ctx context.Context, service string) ([]LIF, error) {
	svm, err := c.svm(ctx)
	if err != nil {
		return nil, err
	}
	type wire struct {
		UUID string `json:"uuid"`
		Name string `json:"name"`
		IP   struct {
			Address string `json:"address"`
		} `json:"ip"`
		State    string   `json:"state"`
		Services []string `json:"services"`
		Location struct {
			Node struct {
				Name string `json:"name"`
			} `json:"node"`
			HomeNode struct {
				Name string `json:"name"`
			} `json:"home_node"`
		} `json:"location"`
	}
	recs, err := list[wire](ctx, c, "/network/ip/interfaces", "/network/ip/interfaces", url.Values{
		"services": {service},
		"svm.uuid": {svm},
		"fields":   {"uuid,name,ip.address,state,services,location.node.name,location.home_node.name"},
	})
	if err != nil {
		return nil, err
	}
	lifs := make([]LIF, 0, len(recs))
	for _, w := range recs {
		lifs = append(lifs, LIF{UUID: w.UUID, Name: w.Name, Address: w.IP.Address, State: w.State,
			HomeNode: w.Location.HomeNode.Name, CurrentNode: w.Location.Node.Name, Services: w.Services})
	}
	return lifs, nil
}
