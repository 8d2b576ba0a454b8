package rest

import (
	"context"
	"net/http"
	"net/url"
)

// LUNMap maps a LUN to an igroup under a LUN ID.
type LUNMap struct {
	LUNUUID    string
	LUNPath    string
	IgroupUUID string
	IgroupName string
	LUNID      int // logical_unit_number
	// ReportingNodes are the names of the nodes that report the LUN
	// (selective LUN map), when the answer carried them: CreateLUNMap's
	// may. Nil means unknown; LUNMapReportingNodes reads them.
	ReportingNodes []string
}

// LUNMapCreate describes a new map. LUNID nil lets ONTAP pick the lowest
// free ID of the igroup.
type LUNMapCreate struct {
	LUNPath    string
	IgroupName string
	LUNID      *int
}

type lunMapWire struct {
	LUN               nameRef   `json:"lun"`
	Igroup            nameRef   `json:"igroup"`
	LogicalUnitNumber *int      `json:"logical_unit_number"`
	ReportingNodes    []nameRef `json:"reporting_nodes"`
}

func (w *lunMapWire) lunMap() LUNMap {
	m := LUNMap{LUNUUID: w.LUN.UUID, LUNPath: w.LUN.Name, IgroupUUID: w.Igroup.UUID, IgroupName: w.Igroup.Name}
	if w.LogicalUnitNumber != nil {
		m.LUNID = *w.LogicalUnitNumber
	}
	if w.ReportingNodes != nil {
		m.ReportingNodes = make([]string, 0, len(w.ReportingNodes))
		for _, n := range w.ReportingNodes {
			m.ReportingNodes = append(m.ReportingNodes, n.Name)
		}
	}
	return m
}

const lunMapsEndpoint = "/protocols/san/lun-maps"

// CreateLUNMap maps a LUN to an igroup and returns the map with its LUN ID,
// and with its reporting nodes if ONTAP's answer held them.
// ClassAlreadyExists if the LUN is already mapped to that igroup.
func (c *Client) CreateLUNMap(ctx context.Context, m LUNMapCreate) (*LUNMap, error) {
	svm, err := c.svm(ctx)
	if err != nil {
		return nil, err
	}
	body := map[string]any{"lun": nameRef{Name: m.LUNPath}, "igroup": nameRef{Name: m.IgroupName}, "svm": nameRef{UUID: svm}}
	if m.LUNID != nil {
		body["logical_unit_number"] = *m.LUNID
	}
	var out collection[lunMapWire]
	err = c.mutate(ctx, http.MethodPost, lunMapsEndpoint, lunMapsEndpoint, url.Values{"return_records": {"true"}}, body, &out)
	if err = c.resolveCreate(ctx, err, func(ctx context.Context) error {
		_, err := c.getLUNMap(ctx, m.LUNPath, m.IgroupName)
		return err
	}); err != nil {
		return nil, err
	}
	if len(out.Records) == 1 {
		if w := out.Records[0]; w.LogicalUnitNumber != nil && w.LUN.UUID != "" && w.Igroup.UUID != "" {
			lm := w.lunMap()
			return &lm, nil
		}
	}
	return c.getLUNMap(ctx, m.LUNPath, m.IgroupName)
}

// IsLUNIDTaken reports that ONTAP refused a map's POST because the
// logical_unit_number it asked for is used in the igroup or by one of its
// initiators (a guessed code, codes.go). Its class is ClassInUse, not the
// "already exists" a 409 answer to a POST would otherwise mean: the map
// does not exist.
func IsLUNIDTaken(err error) bool { return hasCode(err, codeMapLUNIDInUse) }

func (c *Client) getLUNMap(ctx context.Context, lunPath, igroupName string) (*LUNMap, error) {
	maps, err := c.ListLUNMaps(ctx, lunPath, igroupName)
	if err != nil {
		return nil, err
	}
	if len(maps) == 0 {
		return nil, notFound(lunMapsEndpoint, "LUN map", lunPath+" -> "+igroupName)
	}
	return &maps[0], nil
}

// ListLUNMaps lists the SVM's LUN maps, filtered by LUN path and/or igroup
// name ("" matches any).
func (c *Client) ListLUNMaps(ctx context.Context, lunPath, igroupName string) ([]LUNMap, error) {
	svm, err := c.svm(ctx)
	if err != nil {
		return nil, err
	}
	q := url.Values{"svm.uuid": {svm}, "fields": {"lun.uuid,lun.name,igroup.uuid,igroup.name,logical_unit_number"}}
	for field, v := range map[string]string{"lun.name": lunPath, "igroup.name": igroupName} {
		if v == "" {
			continue
		}
		if err := literalQuery(q, field, v); err != nil {
			return nil, err
		}
	}
	recs, err := list[lunMapWire](ctx, c, lunMapsEndpoint, lunMapsEndpoint, q)
	if err != nil {
		return nil, err
	}
	maps := make([]LUNMap, 0, len(recs))
	for i := range recs {
		maps = append(maps, recs[i].lunMap())
	}
	return maps, nil
}

func lunMapPath(lunUUID, igroupUUID, endpoint string) (string, error) {
	p, err := instancePath(lunMapsEndpoint+"/", lunUUID, endpoint)
	if err != nil {
		return "", err
	}
	return instancePath(p+"/", igroupUUID, endpoint)
}

// DeleteLUNMap unmaps a LUN from an igroup. ClassNotFound if it is not mapped.
func (c *Client) DeleteLUNMap(ctx context.Context, lunUUID, igroupUUID string) error {
	const endpoint = lunMapsEndpoint + "/{lun.uuid}/{igroup.uuid}"
	path, err := lunMapPath(lunUUID, igroupUUID, "DELETE "+endpoint)
	if err != nil {
		return err
	}
	return resolveDelete(c.mutate(ctx, http.MethodDelete, endpoint, path, nil, nil, nil))
}

// LUNMapReportingNodes returns the names of the nodes through which a
// mapped LUN is reported (selective LUN map): the portals to use are the
// iSCSI LIFs on these nodes.
func (c *Client) LUNMapReportingNodes(ctx context.Context, lunUUID, igroupUUID string) ([]string, error) {
	const endpoint = lunMapsEndpoint + "/{lun.uuid}/{igroup.uuid}/reporting-nodes"
	path, err := lunMapPath(lunUUID, igroupUUID, "GET "+endpoint)
	if err != nil {
		return nil, err
	}
	recs, err := list[nameRef](ctx, c, endpoint, path+"/reporting-nodes", url.Values{"fields": {"name"}})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(recs))
	for _, r := range recs {
		names = append(names, r.Name)
	}
	return names, nil
}
