package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// exchange is one request the client made and the simulator's answer.
type exchange struct {
	method, path string
	query        url.Values
	request      []byte
	status       int
	response     []byte
}

// recorder records every exchange with the handler it wraps.
type recorder struct {
	next http.Handler
	mu   sync.Mutex
	log  []exchange
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	tw := &teeWriter{ResponseWriter: w, status: http.StatusOK}
	rec.next.ServeHTTP(tw, r)
	rec.mu.Lock()
	rec.log = append(rec.log, exchange{method: r.Method, path: r.URL.Path, query: r.URL.Query(), request: body, status: tw.status, response: tw.body.Bytes()})
	rec.mu.Unlock()
}

type teeWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *teeWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }
func (w *teeWriter) Write(b []byte) (int, error) {
	w.body.Write(b)
	return w.ResponseWriter.Write(b)
}

// TestFieldsExistInONTAP runs the ontap-nas and ontap-san drivers through
// their flows against the simulator — pools, create, clone from a snapshot
// and from a volume, snapshots, publish, unpublish, expand, delete — and
// checks every field in every exchange against ONTAP's definition: each
// path of `fields=`, each query filter, each key of a request body, and
// each key of what the simulator returned, with its JSON kind (an object
// where ONTAP has a list of strings is a mismatch).
func TestFieldsExistInONTAP(t *testing.T) {
	schema, err := LoadSchema()
	if err != nil {
		t.Fatal(err)
	}
	for _, driver := range []string{config.DriverONTAPNAS, config.DriverONTAPSAN} {
		t.Run(driver, func(t *testing.T) {
			b, c, rec := recordedBackend(t, driver)
			runFlows(t, b, driver, c)
			rec.mu.Lock()
			defer rec.mu.Unlock()
			var problems []string
			for _, x := range rec.log {
				problems = append(problems, checkExchange(schema, x)...)
			}
			slices.Sort(problems)
			problems = slices.Compact(problems)
			for _, p := range problems {
				t.Error(p)
			}
			ops, n := coverage(rec.log)
			t.Logf("%d exchanges, %d fields checked; operations: %s", len(rec.log), n, strings.Join(ops, ", "))
		})
	}
}

// TestSimulatorSchemasExistInONTAP checks what the simulator accepts,
// beyond what the flows happen to use: every field of its resources (what
// a GET may return, ask for or filter on) and every key its POST and PATCH
// bodies may hold must be ONTAP's.
func TestSimulatorSchemasExistInONTAP(t *testing.T) {
	schema, err := LoadSchema()
	if err != nil {
		t.Fatal(err)
	}
	for _, fs := range ontapsim.FieldSchemas() {
		resource, _, ok := Resource("/api/" + fs.Route)
		if !ok {
			t.Errorf("%s: no ONTAP resource known for this route", fs.Route)
			continue
		}
		for _, part := range []struct {
			what  string
			paths []string
		}{{"field", fs.Readable}, {"POST key", fs.Post}, {"PATCH key", fs.Patch}} {
			for _, p := range part.paths {
				if _, ok := schema[resource][p]; !ok {
					t.Errorf("/api/%s (%s): the simulator accepts the %s %q, which ONTAP does not have", fs.Route, resource, part.what, p)
				}
			}
		}
	}
}

// recordedBackend runs a simulator behind a recorder, over plain HTTP, and
// a driver of the given kind and a REST client on it. Jobs take a few
// milliseconds and the client asks for no wait (return_timeout=0), so that
// it polls them.
func recordedBackend(t *testing.T, driver string) (backends.Backend, *rest.Client, *recorder) {
	t.Helper()
	job := ontapsim.Range{Min: 5 * time.Millisecond, Max: 10 * time.Millisecond}
	s, err := ontapsim.New(ontapsim.Config{Latency: ontapsim.LatencyModel{LUNCreate: job, VolumeCreate: job, VolumePatch: job,
		VolumeDelete: job, SnapshotCreate: job, SnapshotDelete: job, CloneCreate: job}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	rec := &recorder{next: s.Handler()}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	cfg := map[string]any{
		"version": 1, "storageDriverName": driver, "backendName": "conformance", "managementLIF": u.Host,
		"svm": s.Info().SVM, "username": "admin", "password": "password",
	}
	if driver == config.DriverONTAPNAS {
		cfg["autoExportPolicy"] = true
	} else {
		cfg["useCHAP"] = true
		cfg["chapUsername"], cfg["chapInitiatorSecret"] = "node-user", "node-secret-0123"
		cfg["chapTargetUsername"], cfg["chapTargetInitiatorSecret"] = "target-user", "target-secret-0123"
	}
	data, _ := json.Marshal(cfg)
	bc, err := config.Parse("conformance", data, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	edit := func(c *rest.ClientConfig) {
		c.Scheme, c.ReturnTimeout = "http", time.Millisecond
		c.RetryBaseDelay, c.RetryMaxDelay, c.JobPollInitial, c.JobPollMax = time.Millisecond, 10*time.Millisecond, time.Millisecond, 10*time.Millisecond
	}
	b, err := ontap.NewBackend(bc, ontap.Options{Client: edit})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := b.(io.Closer); ok {
		t.Cleanup(func() { c.Close() })
	}
	cc := rest.ClientConfig{ManagementLIF: u.Host, SVM: s.Info().SVM, Username: "admin", Password: "password"}
	edit(&cc)
	c, err := rest.NewClient(cc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return b, c, rec
}

// flow is one driver's run over a volume's life.
type flow struct {
	t      *testing.T
	ctx    context.Context
	b      backends.Backend
	driver string
	access backends.AccessType
	fsType string
	pool   string
}

func (f *flow) must(what string, err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatalf("%s: %v", what, err)
	}
}

// runFlows is what the controller does with a backend over a volume's
// life, each step checked only for success (the fields are the point),
// with every read of the REST client in between, while the volume is
// published.
func runFlows(t *testing.T, b backends.Backend, driver string, c *rest.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := &flow{t: t, ctx: ctx, b: b, driver: driver, access: backends.AccessMount, fsType: "nfs"}
	if driver == config.DriverONTAPSAN {
		f.fsType = "ext4"
	}
	pools, err := b.Pools(ctx)
	f.must("Pools", err)
	f.pool = pools[0].Name
	_, err = b.Capacity(ctx, f.pool, backends.VolumeOptions{})
	f.must("Capacity", err)
	reserve, snapdir := 10, true
	vol := f.create("pvc-conformance-1", nil, backends.VolumeOptions{SpaceReserve: "none", SnapshotPolicy: "none",
		SnapshotReserve: &reserve, SnapshotDir: &snapdir, UnixPermissions: "0755", SecurityStyle: "unix", TieringPolicy: "none"})
	_, err = b.ListVolumes(ctx)
	f.must("ListVolumes", err)
	snap, err := b.CreateSnapshot(ctx, vol, b.SnapshotName("snapshot-conformance-1"))
	f.must("CreateSnapshot", err)
	_, err = b.Snapshots(ctx, backends.SnapshotFilter{Volume: vol})
	f.must("Snapshots of a volume", err)
	_, err = b.Snapshots(ctx, backends.SnapshotFilter{Name: snap.Name})
	f.must("Snapshots by name", err)
	fromSnap := f.create("pvc-conformance-2", &backends.Source{Snapshot: snap}, backends.VolumeOptions{})
	fromVol := f.create("pvc-conformance-3", &backends.Source{Volume: vol}, backends.VolumeOptions{})
	nodes := []backends.Node{
		{Name: "node-1", IQN: "iqn.2005-03.org.open-iscsi:node-1", IPs: []string{"192.0.2.10"}},
		{Name: "node-2", IQN: "iqn.2005-03.org.open-iscsi:node-2", IPs: []string{"192.0.2.11"}},
	}
	var pc map[string]string
	for _, n := range nodes {
		pc, err = b.Publish(ctx, vol, &backends.PublishRequest{Node: n, AccessType: f.access, FSType: f.fsType})
		f.must("Publish", err)
	}
	f.clientReads(c, vol.Context["internalName"], snap.Name, pc)
	for _, n := range nodes {
		f.must("Unpublish", b.Unpublish(ctx, vol, n.Name, &n))
	}
	_, err = b.ExpandVolume(ctx, vol, 2<<30)
	f.must("ExpandVolume", err)
	f.modifyAndGroup(vol.ID, fromSnap, fromVol)
	for _, v := range []*backends.Volume{fromSnap, fromVol} {
		f.must("DeleteVolume of a clone", b.DeleteVolume(ctx, v))
	}
	f.must("DeleteSnapshot", b.DeleteSnapshot(ctx, snap))
	f.must("DeleteVolume", b.DeleteVolume(ctx, vol))
}

// modifyAndGroup changes volume id in place with every key its driver
// takes (ControllerModifyVolume), and snapshots two volumes together
// (CreateVolumeGroupSnapshot) and deletes the members.
func (f *flow) modifyAndGroup(id string, a, b *backends.Volume) {
	f.t.Helper()
	vol, err := f.b.Volume(f.ctx, id)
	f.must("Volume "+id, err)
	p := func(s string) *string { return &s }
	reserve, snapdir := 20, false
	m := &backends.Modify{AdaptiveQoSPolicy: p("extreme"), SnapshotPolicy: p("default"), SnapshotReserve: &reserve, TieringPolicy: p("auto")}
	if f.driver == config.DriverONTAPNAS {
		m.SnapshotDir, m.UnixPermissions, m.ExportPolicy = &snapdir, p("0750"), p("default")
	}
	f.must("ModifyVolume", f.b.(backends.Modifier).ModifyVolume(f.ctx, vol, m))
	snaps, err := f.b.(backends.GroupSnapshotter).CreateGroupSnapshot(f.ctx, []*backends.Volume{a, b}, "groupsnapshot-conformance")
	f.must("CreateGroupSnapshot", err)
	for _, sn := range snaps {
		f.must("DeleteSnapshot of a group member", f.b.DeleteSnapshot(f.ctx, sn))
	}
}

// create makes a volume and looks it up, as the controller does before
// it uses one.
func (f *flow) create(name string, src *backends.Source, opts backends.VolumeOptions) *backends.Volume {
	f.t.Helper()
	v, err := f.b.CreateVolume(f.ctx, &backends.CreateRequest{Name: name, Pool: f.pool, SizeBytes: 1 << 30,
		AccessType: f.access, FSType: f.fsType, Options: opts, Source: src})
	f.must("CreateVolume "+name, err)
	v, err = f.b.Volume(f.ctx, v.ID)
	f.must("Volume "+name, err)
	return v
}

// clientReads runs the REST client's reads of the volume, its snapshot
// and (published) its export policy or LUN, map and igroup.
func (f *flow) clientReads(c *rest.Client, volName, snapName string, pc map[string]string) {
	f.t.Helper()
	ctx := f.ctx
	_, err := c.SVM(ctx)
	f.must("SVM", err)
	_, err = c.Aggregate(ctx, f.pool)
	f.must("Aggregate", err)
	v, err := c.GetVolume(ctx, volName)
	f.must("GetVolume", err)
	_, err = c.ListSnapshots(ctx, v.UUID)
	f.must("ListSnapshots", err)
	_, err = c.GetSnapshot(ctx, v.UUID, snapName)
	f.must("GetSnapshot", err)
	_, err = c.ListAllSnapshots(ctx, "trident_", snapName)
	f.must("ListAllSnapshots", err)
	if f.driver == config.DriverONTAPNAS {
		_, err = c.DataLIFs(ctx, rest.ServiceDataNFS)
		f.must("DataLIFs", err)
		pol, err := c.GetExportPolicy(ctx, v.ExportPolicy)
		f.must("GetExportPolicy", err)
		_, err = c.ListExportRules(ctx, pol.ID)
		f.must("ListExportRules", err)
		_, err = c.ListExportPoliciesWithRules(ctx)
		f.must("ListExportPoliciesWithRules", err)
		return
	}
	_, err = c.DataLIFs(ctx, rest.ServiceDataISCSI)
	f.must("DataLIFs", err)
	_, err = c.ISCSIService(ctx)
	f.must("ISCSIService", err)
	luns, err := c.ListLUNs(ctx, "/vol/"+volName+"/*")
	f.must("ListLUNs", err)
	lun, err := c.GetLUN(ctx, luns[0].Path)
	f.must("GetLUN", err)
	_, err = c.LUNAttributes(ctx, lun.UUID)
	f.must("LUNAttributes", err)
	ig, err := c.GetIgroup(ctx, pc["iscsiIgroup"])
	f.must("GetIgroup", err)
	_, err = c.ListLUNMaps(ctx, lun.Path, ig.Name)
	f.must("ListLUNMaps", err)
	_, err = c.LUNMapReportingNodes(ctx, lun.UUID, ig.UUID)
	f.must("LUNMapReportingNodes", err)
	_, err = c.ListIgroups(ctx)
	f.must("ListIgroups", err)
	_, err = c.ListLUNMaps(ctx, "", "")
	f.must("ListLUNMaps (all)", err)
}

// operationParams are query parameters of ONTAP's operations, not fields
// (ONTAP REST API reference, "Query parameters"; docs/design/ontap-rest.md).
var operationParams = map[string]bool{
	"fields": true, "return_records": true, "return_timeout": true, "max_records": true, "order_by": true,
	"allow_delete_while_mapped": true, "force": true,
}

// checkExchange lists the fields of one exchange that ONTAP's definition
// does not have.
func checkExchange(s Schema, x exchange) []string {
	resource, route, ok := Resource(x.path)
	if !ok {
		return []string{fmt.Sprintf("%s %s: no ONTAP resource known for this path", x.method, x.path)}
	}
	fields := s[resource]
	var out []string
	bad := func(side, path, why string) {
		out = append(out, fmt.Sprintf("%s /api/%s (%s): %s %q %s", x.method, route, resource, side, path, why))
	}
	for key, values := range x.query {
		switch {
		case key == "fields":
			for _, v := range values {
				for _, p := range strings.Split(v, ",") {
					if _, ok := fields[p]; !ok && p != "*" && p != "**" {
						bad("client asks for field", p, "which ONTAP does not have")
					}
				}
			}
		case operationParams[key]:
		default:
			if _, ok := fields[key]; !ok {
				bad("client filters on", key, "which ONTAP does not have")
			}
		}
	}
	if len(x.request) > 0 {
		for p, k := range flatten(x.request) {
			checkField(fields, p, k, func(why string) { bad("client sends", p, why) })
		}
	}
	for _, rec := range records(x) {
		for p, k := range flatten(rec) {
			checkField(fields, p, k, func(why string) { bad("simulator returns", p, why) })
		}
	}
	return out
}

func checkField(fields map[string]Kind, path string, got Kind, bad func(string)) {
	want, ok := fields[path]
	switch {
	case !ok:
		bad("which ONTAP does not have")
	case want != got && got != "":
		bad(fmt.Sprintf("as %s where ONTAP has %s", got, want))
	}
}

// records are the resource records of a successful answer: a collection's
// records, or the object itself. Job links (202) and errors have none.
func records(x exchange) [][]byte {
	if x.status < 200 || x.status > 299 || len(x.response) == 0 {
		return nil
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(x.response, &top) != nil {
		return nil
	}
	if recs, ok := top["records"]; ok {
		var list []json.RawMessage
		_ = json.Unmarshal(recs, &list)
		out := make([][]byte, len(list))
		for i, r := range list {
			out[i] = r
		}
		return out
	}
	if _, ok := top["job"]; ok && len(top) <= 2 {
		return nil // {"job": {...}, "_links": ...}
	}
	return [][]byte{x.response}
}

// flatten lists the field paths of a JSON object with their kinds, arrays
// looked through; "_links" and what lies below it are left out. An empty
// array's kind is unknown ("").
func flatten(data []byte) map[string]Kind {
	var v any
	if json.Unmarshal(data, &v) != nil {
		return nil
	}
	out := map[string]Kind{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		obj, ok := v.(map[string]any)
		if !ok {
			return
		}
		for k, child := range obj {
			if k == "_links" {
				continue
			}
			p := prefix + k
			out[p] = kindOf(child)
			if arr, ok := child.([]any); ok {
				for _, e := range arr {
					walk(p+".", e)
				}
				continue
			}
			walk(p+".", child)
		}
	}
	walk("", v)
	return out
}

func kindOf(v any) Kind {
	switch x := v.(type) {
	case map[string]any:
		return Object
	case []any:
		if len(x) == 0 {
			return ""
		}
		if _, ok := x[0].(map[string]any); ok {
			return Objects
		}
		return Scalars
	}
	return Scalar
}

// coverage is what the exchanges touched: the distinct operations
// ("GET storage/volumes") and resource fields.
func coverage(log []exchange) (ops []string, fields int) {
	seen, opSeen := map[string]bool{}, map[string]bool{}
	for _, x := range log {
		r, route, _ := Resource(x.path)
		if op := x.method + " " + route; !opSeen[op] {
			opSeen[op] = true
			ops = append(ops, op)
		}
		for _, rec := range records(x) {
			for p := range flatten(rec) {
				seen[r+" "+p] = true
			}
		}
		for p := range flatten(x.request) {
			seen[r+" "+p] = true
		}
		for _, v := range x.query["fields"] {
			for _, p := range strings.Split(v, ",") {
				seen[r+" "+p] = true
			}
		}
	}
	sort.Strings(ops)
	return ops, len(seen)
}
