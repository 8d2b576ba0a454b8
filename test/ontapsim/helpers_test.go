package ontapsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// The simulator's tests talk raw HTTP/JSON: they must not depend on the
// typed client in backends/ontap, so that a bug on one side of the wire
// cannot hide a bug on the other.

type testAPI struct {
	t    *testing.T
	sim  *Simulator
	base string
	hc   *http.Client
	user string
	pass string
}

func newTestSim(t *testing.T, cfg Config) *testAPI {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		srv.Close()
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &testAPI{t: t, sim: s, base: srv.URL, hc: srv.Client(), user: s.cfg.Username, pass: s.cfg.Password}
}

// resp is a decoded response.
type resp struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (r resp) errCode() string {
	if e, ok := r.body["error"].(map[string]any); ok {
		s, _ := e["code"].(string)
		return s
	}
	return ""
}

func (r resp) errMessage() string {
	if e, ok := r.body["error"].(map[string]any); ok {
		s, _ := e["message"].(string)
		return s
	}
	return ""
}

func (r resp) records() []map[string]any {
	raw, _ := r.body["records"].([]any)
	out := make([]map[string]any, 0, len(raw))
	for _, x := range raw {
		out = append(out, x.(map[string]any))
	}
	return out
}

func (a *testAPI) do(method, path string, body any) resp {
	a.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			a.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	req.SetBasicAuth(a.user, a.pass)
	req.Header.Set("Content-Type", "application/hal+json")
	res, err := a.hc.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	r := resp{status: res.StatusCode, header: res.Header, raw: string(data)}
	if len(data) > 0 {
		if err := json.Unmarshal(data, &r.body); err != nil {
			a.t.Fatalf("%s %s: body is not JSON: %q", method, path, data)
		}
	}
	return r
}

// must asserts the status and returns the response.
func (a *testAPI) must(status int, method, path string, body any) resp {
	a.t.Helper()
	r := a.do(method, path, body)
	if r.status != status {
		a.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, status, r.raw)
	}
	return r
}

// wantErr asserts an ONTAP error with status and code.
func (a *testAPI) wantErr(status int, code int, method, path string, body any) resp {
	a.t.Helper()
	r := a.do(method, path, body)
	if r.status != status || r.errCode() != fmt.Sprint(code) {
		a.t.Fatalf("%s %s: got %d code %q, want %d code %d: %s", method, path, r.status, r.errCode(), status, code, r.raw)
	}
	return r
}

func (a *testAPI) svmUUID() string { return a.sim.Info().SVMUUID }

// createVolume POSTs a volume and waits for the job (return_timeout).
func (a *testAPI) createVolume(body map[string]any) string {
	a.t.Helper()
	if body["svm"] == nil {
		body["svm"] = map[string]any{"name": "svm0"}
	}
	if body["aggregates"] == nil {
		body["aggregates"] = []any{map[string]any{"name": "aggr1"}}
	}
	a.must(http.StatusCreated, "POST", "/api/storage/volumes?return_timeout=30", body)
	return a.volumeUUID(body["name"].(string))
}

func (a *testAPI) volumeUUID(name string) string {
	a.t.Helper()
	r := a.must(200, "GET", "/api/storage/volumes?name="+url.QueryEscape(name), nil)
	recs := r.records()
	if len(recs) != 1 {
		a.t.Fatalf("volume %q: %d records", name, len(recs))
	}
	return recs[0]["uuid"].(string)
}

func (a *testAPI) createLUN(path string, size int64) string {
	a.t.Helper()
	r := a.must(http.StatusCreated, "POST", "/api/storage/luns?return_records=true", map[string]any{
		"name": path, "os_type": "linux", "svm": map[string]any{"name": "svm0"},
		"space": map[string]any{"size": size, "guarantee": map[string]any{"requested": false}},
	})
	return r.records()[0]["uuid"].(string)
}

func (a *testAPI) createIgroup(name string, initiators ...string) string {
	a.t.Helper()
	var inits []any
	for _, i := range initiators {
		inits = append(inits, map[string]any{"name": i})
	}
	body := map[string]any{"name": name, "protocol": "iscsi", "os_type": "linux", "svm": map[string]any{"name": "svm0"}}
	if inits != nil {
		body["initiators"] = inits
	}
	r := a.must(http.StatusCreated, "POST", "/api/protocols/san/igroups?return_records=true", body)
	return r.records()[0]["uuid"].(string)
}

func (a *testAPI) mapLUN(lunPath, igroup string) int {
	a.t.Helper()
	r := a.must(http.StatusCreated, "POST", "/api/protocols/san/lun-maps?return_records=true", map[string]any{
		"lun": map[string]any{"name": lunPath}, "igroup": map[string]any{"name": igroup}, "svm": map[string]any{"name": "svm0"},
	})
	return int(r.records()[0]["logical_unit_number"].(float64))
}

// dig walks a decoded JSON value along a dotted path.
func dig(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}
