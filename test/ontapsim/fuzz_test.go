package ontapsim

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzDecodeBody: any request body decodes to an object or a 400 ONTAP
// error, and the typed readers never panic on what it decoded.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{
		`{"name":"v","svm":{"name":"svm0"},"aggregates":[{"name":"aggr1"}],"size":"1GB"}`,
		`{"clients":[{"match":"10.0.0.0/24"}],"ro_rule":["any"]}`,
		`{"size":1e400}`, `[]`, `{`, `{"a":{"b":[1,{"c":null}]}}`, `{"size":"-5"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeBody(data)
		if err != nil {
			if err.Status != http.StatusBadRequest || err.Code == "" {
				t.Fatalf("bad error %+v", err)
			}
			return
		}
		_ = checkBodyKeys(m, volumePostFields, volumeResource.schema)
		_ = leafPaths(m)
		b := &bodyReader{m: m}
		b.str("name")
		b.size("size")
		b.integer("nas.unix_permissions")
		b.boolean("snapshot_directory_access_enabled")
		b.enum("guarantee.type", "volume", "none")
		b.strList("ro_rule")
		if objs, ok := b.objects("clients"); ok {
			for _, o := range objs {
				if s, ok := o.str("match"); ok {
					parseClientMatch(s)
				}
			}
		}
	})
}

// FuzzRequests sends arbitrary bodies and queries to the create endpoints:
// the answer is always JSON, and an error is always an ONTAP error object;
// nothing panics.
func FuzzRequests(f *testing.F) {
	f.Add("/api/storage/volumes", "", []byte(`{"name":"v","svm":{"name":"svm0"},"aggregates":[{"name":"aggr1"}]}`))
	f.Add("/api/storage/luns", "return_records=true", []byte(`{"name":"/vol/v/lun0","os_type":"linux","space":{"size":4096},"svm":{"name":"svm0"}}`))
	f.Add("/api/protocols/san/igroups", "", []byte(`{"name":"g","os_type":"linux","initiators":[{"name":"iqn.2020-01.a.b:c"}],"svm":{"name":"svm0"}}`))
	f.Add("/api/protocols/nfs/export-policies", "fields=**", []byte(`{"name":"p","rules":[{"clients":[{"match":"0.0.0.0/0"}]}],"svm":{"name":"svm0"}}`))
	f.Add("/api/protocols/san/lun-maps", "", []byte(`{"lun":{"name":"/vol/v/lun0"},"igroup":{"name":"g"}}`))
	f.Add("/api/storage/volumes", "name=a|b&fields=nas.{path", []byte(``))
	s, err := New(Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	ctx := context.WithValue(context.Background(), internalKey{}, true)
	f.Fuzz(func(t *testing.T, path, query string, body []byte) {
		if !strings.HasPrefix(path, "/api/") || strings.ContainsAny(path, "?# \x00") {
			return
		}
		for _, method := range []string{"POST", "GET"} {
			req, err := http.NewRequestWithContext(ctx, method, "http://sim"+path+"?"+query, bytes.NewReader(body))
			if err != nil {
				return
			}
			w := httptest.NewRecorder()
			s.serveHTTP(w, req)
			var out map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
				t.Fatalf("%s %s?%s: non-JSON answer %d %q", method, path, query, w.Code, w.Body.String())
			}
			if w.Code >= 400 {
				e, ok := out["error"].(map[string]any)
				if !ok || e["code"] == "" || e["message"] == "" {
					t.Fatalf("%s %s: error without ONTAP error object: %s", method, path, w.Body.String())
				}
			}
		}
	})
}
