package ontapsim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// Fixtures set up state the way a client would have: each one is a REST
// request served in-process (same validation, same jobs), but without auth,
// latency, faults or counting. Use them to build Trident-made objects
// (names like "trident_pvc_<uuid>", comments, LUN attributes) for
// import/compatibility tests.

type internalKey struct{}

func isInternal(r *http.Request) bool { return r.Context().Value(internalKey{}) != nil }

// memWriter is a minimal in-memory http.ResponseWriter.
type memWriter struct {
	h    http.Header
	code int
	buf  bytes.Buffer
}

func (w *memWriter) Header() http.Header         { return w.h }
func (w *memWriter) Write(p []byte) (int, error) { return w.buf.Write(p) }
func (w *memWriter) WriteHeader(code int)        { w.code = code }

// Do sends one ONTAP REST request in-process ("/api/..." path with query)
// and returns the status and decoded body; an ONTAP error body becomes an
// error. It waits for jobs (return_timeout=120 unless set).
func (s *Simulator) Do(method, pathAndQuery string, body any) (int, map[string]any, error) {
	u, err := url.Parse(pathAndQuery)
	if err != nil {
		return 0, nil, err
	}
	q := u.Query()
	if method != http.MethodGet && q.Get("return_timeout") == "" {
		q.Set("return_timeout", "120")
		u.RawQuery = q.Encode()
	}
	var rd *bytes.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(data)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(context.WithValue(context.Background(), internalKey{}, true), method, u.String(), rd)
	if err != nil {
		return 0, nil, err
	}
	w := &memWriter{h: http.Header{}, code: http.StatusOK}
	s.serveHTTP(w, req)
	var out map[string]any
	if w.buf.Len() > 0 {
		if err := json.Unmarshal(w.buf.Bytes(), &out); err != nil {
			return w.code, nil, fmt.Errorf("%s %s: undecodable response: %v", method, pathAndQuery, err)
		}
	}
	if e, ok := out["error"].(map[string]any); ok {
		return w.code, out, fmt.Errorf("%s %s: HTTP %d: %v (code %v)", method, u.Path, w.code, e["message"], e["code"])
	}
	return w.code, out, nil
}

// VolumeSpec describes a fixture volume. Zero values take ONTAP's defaults
// (thick, 20 MiB, snapshot policy "default", 5 % reserve, policy "default").
type VolumeSpec struct {
	Name            string
	Aggregate       string // default: the first aggregate
	Size            int64
	Thin            bool
	ExportPolicy    string
	JunctionPath    string // "" = unmounted
	Comment         string
	SnapshotPolicy  string
	SnapshotReserve *int
	UnixPermissions int // digit form (755); 0 = default
	SnapdirAccess   *bool
	SecurityStyle   string
}

// CreateVolume creates a volume with a POST /api/storage/volumes, like
// Trident does, and returns it.
func (s *Simulator) CreateVolume(spec VolumeSpec) (VolumeInfo, error) {
	info := s.Info()
	aggr := spec.Aggregate
	if aggr == "" {
		aggr = info.Aggregates[0]
	}
	body := map[string]any{
		"name": spec.Name, "svm": map[string]any{"name": info.SVM},
		"aggregates": []any{map[string]any{"name": aggr}},
	}
	if spec.Size > 0 {
		body["size"] = spec.Size
	}
	if spec.Thin {
		body["guarantee"] = map[string]any{"type": "none"}
	}
	nas := map[string]any{}
	if spec.ExportPolicy != "" {
		nas["export_policy"] = map[string]any{"name": spec.ExportPolicy}
	}
	if spec.JunctionPath != "" {
		nas["path"] = spec.JunctionPath
	}
	if spec.UnixPermissions != 0 {
		nas["unix_permissions"] = spec.UnixPermissions
	}
	if spec.SecurityStyle != "" {
		nas["security_style"] = spec.SecurityStyle
	}
	if len(nas) > 0 {
		body["nas"] = nas
	}
	if spec.Comment != "" {
		body["comment"] = spec.Comment
	}
	if spec.SnapshotPolicy != "" {
		body["snapshot_policy"] = map[string]any{"name": spec.SnapshotPolicy}
	}
	if spec.SnapshotReserve != nil {
		body["space"] = map[string]any{"snapshot": map[string]any{"reserve_percent": *spec.SnapshotReserve}}
	}
	if spec.SnapdirAccess != nil {
		body["snapshot_directory_access_enabled"] = *spec.SnapdirAccess
	}
	if _, _, err := s.Do(http.MethodPost, "/api/storage/volumes", body); err != nil {
		return VolumeInfo{}, err
	}
	v, ok := s.Volume(spec.Name)
	if !ok {
		return VolumeInfo{}, fmt.Errorf("volume %q not found after create", spec.Name)
	}
	return v, nil
}

// LUNSpec describes a fixture LUN.
type LUNSpec struct {
	Path       string // /vol/<volume>/<lun>
	Size       int64
	OSType     string // default "linux"
	Reserved   bool   // space.guarantee.requested
	Comment    string
	Attributes map[string]string // e.g. com.netapp.ndvp.fstype=ext4
}

// CreateLUN creates a LUN (and its attributes) through the REST API.
func (s *Simulator) CreateLUN(spec LUNSpec) (LUNInfo, error) {
	osType := spec.OSType
	if osType == "" {
		osType = "linux"
	}
	body := map[string]any{
		"name": spec.Path, "os_type": osType, "svm": map[string]any{"name": s.Info().SVM},
		"space": map[string]any{"size": spec.Size, "guarantee": map[string]any{"requested": spec.Reserved}},
	}
	if spec.Comment != "" {
		body["comment"] = spec.Comment
	}
	if len(spec.Attributes) > 0 {
		var attrs []any
		for k, v := range spec.Attributes {
			attrs = append(attrs, map[string]any{"name": k, "value": v})
		}
		body["attributes"] = attrs
	}
	if _, _, err := s.Do(http.MethodPost, "/api/storage/luns", body); err != nil {
		return LUNInfo{}, err
	}
	for _, l := range s.LUNs() {
		if l.Path == spec.Path {
			return l, nil
		}
	}
	return LUNInfo{}, fmt.Errorf("LUN %q not found after create", spec.Path)
}

// CreateIGroup creates an initiator group (protocol "" = iscsi, osType "" =
// linux) with the given initiators.
func (s *Simulator) CreateIGroup(name, protocol, osType string, initiators ...string) (IGroupInfo, error) {
	if protocol == "" {
		protocol = "iscsi"
	}
	if osType == "" {
		osType = "linux"
	}
	body := map[string]any{"name": name, "protocol": protocol, "os_type": osType, "svm": map[string]any{"name": s.Info().SVM}}
	var inits []any
	for _, i := range initiators {
		inits = append(inits, map[string]any{"name": i})
	}
	if inits != nil {
		body["initiators"] = inits
	}
	if _, _, err := s.Do(http.MethodPost, "/api/protocols/san/igroups", body); err != nil {
		return IGroupInfo{}, err
	}
	for _, g := range s.IGroups() {
		if g.Name == name {
			return g, nil
		}
	}
	return IGroupInfo{}, fmt.Errorf("igroup %q not found after create", name)
}

// MapLUN maps a LUN to an igroup with the lowest free LUN ID and returns it.
func (s *Simulator) MapLUN(lunPath, igroup string) (int, error) {
	body := map[string]any{"lun": map[string]any{"name": lunPath}, "igroup": map[string]any{"name": igroup},
		"svm": map[string]any{"name": s.Info().SVM}}
	_, out, err := s.Do(http.MethodPost, "/api/protocols/san/lun-maps?return_records=true", body)
	if err != nil {
		return 0, err
	}
	recs, _ := out["records"].([]any)
	if len(recs) != 1 {
		return 0, fmt.Errorf("lun-map create returned %d records", len(recs))
	}
	id, _ := recs[0].(map[string]any)["logical_unit_number"].(float64)
	return int(id), nil
}

// CreateExportPolicy creates an export policy with rules (clients required;
// other rule fields default to ["any"]).
func (s *Simulator) CreateExportPolicy(name string, rules ...ExportRule) (ExportPolicyInfo, error) {
	var rs []any
	for _, r := range rules {
		var clients []any
		for _, c := range r.Clients {
			clients = append(clients, map[string]any{"match": c})
		}
		rule := map[string]any{"clients": clients}
		for k, v := range map[string][]string{"protocols": r.Protocols, "ro_rule": r.RORule, "rw_rule": r.RWRule, "superuser": r.Superuser} {
			if v != nil {
				rule[k] = v
			}
		}
		rs = append(rs, rule)
	}
	body := map[string]any{"name": name, "svm": map[string]any{"name": s.Info().SVM}}
	if rs != nil {
		body["rules"] = rs
	}
	if _, _, err := s.Do(http.MethodPost, "/api/protocols/nfs/export-policies", body); err != nil {
		return ExportPolicyInfo{}, err
	}
	for _, p := range s.ExportPolicies() {
		if p.Name == name {
			return p, nil
		}
	}
	return ExportPolicyInfo{}, fmt.Errorf("export policy %q not found after create", name)
}

// CreateSnapshot snapshots a volume through the REST API.
func (s *Simulator) CreateSnapshot(volume, name string) (SnapshotInfo, error) {
	v, ok := s.Volume(volume)
	if !ok {
		return SnapshotInfo{}, fmt.Errorf("no volume %q", volume)
	}
	if _, _, err := s.Do(http.MethodPost, "/api/storage/volumes/"+v.UUID+"/snapshots", map[string]any{"name": name}); err != nil {
		return SnapshotInfo{}, err
	}
	for _, sn := range s.Snapshots(volume) {
		if sn.Name == name {
			return sn, nil
		}
	}
	return SnapshotInfo{}, fmt.Errorf("snapshot %q not found after create", name)
}

// CreateQoSPolicy makes a QoS policy group of the data SVM through the REST
// API: a fixed one limited to maxIOPS, or an adaptive one.
func (s *Simulator) CreateQoSPolicy(name string, adaptive bool, maxIOPS int64) error {
	body := map[string]any{"name": name, "svm": map[string]any{"name": s.Info().SVM}}
	if adaptive {
		body["adaptive"] = map[string]any{"expected_iops": 1000, "peak_iops": 5000}
	} else {
		body["fixed"] = map[string]any{"max_throughput_iops": maxIOPS}
	}
	_, _, err := s.Do(http.MethodPost, "/api/storage/qos/policies", body)
	return err
}
