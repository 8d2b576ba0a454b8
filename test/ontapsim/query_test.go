package ontapsim

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
)

func TestFieldsSelection(t *testing.T) {
	a := newTestSim(t, Config{})
	uuid := a.createVolume(map[string]any{"name": "fv", "guarantee": map[string]any{"type": "none"}, "nas": map[string]any{"path": "/fv"}, "comment": "c"})
	keys := func(m map[string]any) string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		return strings.Join(ks, ",")
	}
	get := func(q string) map[string]any {
		r := a.must(200, "GET", "/api/storage/volumes?name=fv&"+q, nil)
		return r.records()[0]
	}
	tests := []struct {
		name  string
		query string
		check func(map[string]any) bool
	}{
		{"default: keys and filtered fields", "", func(m map[string]any) bool { return keys(m) == "_links,name,uuid" }},
		{"empty fields= is the default", "fields=", func(m map[string]any) bool { return keys(m) == "_links,name,uuid" }},
		{"named fields", "fields=size,comment", func(m map[string]any) bool { return keys(m) == "_links,comment,name,size,uuid" }},
		{"* leaves out expensive nas.path", "fields=*", func(m map[string]any) bool {
			return dig(m, "nas.path") == nil && dig(m, "nas.export_policy.name") == "default" && m["guarantee"] == nil && m["size"] != nil
		}},
		{"* plus an expensive field", "fields=*,nas.path", func(m map[string]any) bool { return dig(m, "nas.path") == "/fv" }},
		{"a parent brings its expensive children", "fields=nas", func(m map[string]any) bool {
			return dig(m, "nas.path") == "/fv" && dig(m, "nas.unix_permissions") != nil
		}},
		{"** is everything", "fields=**", func(m map[string]any) bool {
			return dig(m, "guarantee.type") == "none" && dig(m, "space.logical_space.used") != nil
		}},
		{"exclusion", "fields=**,!space,!clone", func(m map[string]any) bool { return m["space"] == nil && m["clone"] == nil && m["guarantee"] != nil }},
		{"braces", "fields=nas.{path,gid}", func(m map[string]any) bool { return keys(m["nas"].(map[string]any)) == "gid,path" }},
		{"unknown with ignore_unknown_fields", "fields=size,bogus&ignore_unknown_fields=true", func(m map[string]any) bool { return m["size"] != nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a.t = t
			if m := get(tt.query); !tt.check(m) {
				t.Fatalf("record %v", m)
			}
		})
	}
	a.t = t
	a.wantErr(400, codeInvalidValue, "GET", "/api/storage/volumes?fields=bogus", nil)
	a.wantErr(400, codeBadBraces, "GET", "/api/storage/volumes?fields=nas.{path", nil)
	// Instance GET: all standard fields without fields=.
	inst := a.must(200, "GET", "/api/storage/volumes/"+uuid, nil).body
	if inst["size"] == nil || inst["svm"] == nil || dig(inst, "nas.path") != nil {
		t.Fatalf("instance GET: %v", inst)
	}
	// Plain JSON clients get no HAL links.
	req, _ := http.NewRequest("GET", a.base+"/api/storage/volumes/"+uuid, nil)
	req.SetBasicAuth(a.user, a.pass)
	req.Header.Set("Accept", "application/json")
	res, err := a.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content type %q", ct)
	}
}

func TestFilters(t *testing.T) {
	a := newTestSim(t, Config{})
	thin := map[string]any{"type": "none"}
	for i, n := range []string{"trident_pvc_a", "trident_pvc_b", "other_c"} {
		a.createVolume(map[string]any{"name": n, "size": fmt.Sprintf("%dGB", i+1), "guarantee": thin, "comment": map[bool]string{true: "x"}[i == 0]})
	}
	a.createVolume(map[string]any{"name": "mounted", "guarantee": thin, "nas": map[string]any{"path": "/mounted"}})
	names := func(q string) string {
		r := a.must(200, "GET", "/api/storage/volumes?"+q, nil)
		var ns []string
		for _, rec := range r.records() {
			ns = append(ns, rec["name"].(string))
		}
		sort.Strings(ns)
		if int(r.body["num_records"].(float64)) != len(ns) {
			t.Fatalf("num_records mismatch: %s", r.raw)
		}
		return strings.Join(ns, ",")
	}
	tests := []struct{ query, want string }{
		{"name=trident_*", "trident_pvc_a,trident_pvc_b"},
		{"name=trident_pvc_a|other_c", "other_c,trident_pvc_a"},
		{"name=!trident_*&is_svm_root=false", "mounted,other_c"},
		{"size=>=" + fmt.Sprint(2<<30), "other_c,trident_pvc_b"},
		{"size=<" + fmt.Sprint(2<<30) + "&is_svm_root=false", "mounted,trident_pvc_a"},
		{"size=" + fmt.Sprint(1<<30) + ".." + fmt.Sprint(2<<30) + "&is_svm_root=false", "trident_pvc_a,trident_pvc_b"},
		{"comment=!null", "trident_pvc_a"},
		{"nas.path=/mounted", "mounted"},
		{"nas.path=null&is_svm_root=false", "other_c,trident_pvc_a,trident_pvc_b"},
		{"svm.name=svm0&style=flexvol&state=online&name=trident_pvc_b", "trident_pvc_b"},
		{"aggregates.name=aggr1|aggr2&name=other_c", "other_c"},
		{`name="trident_*"`, ""},
		{"name=nothing", ""},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			a.t = t
			if got := names(tt.query); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
	a.t = t
	// Filtered fields come back with the records.
	r := a.must(200, "GET", "/api/storage/volumes?name=other_c&state=online", nil)
	if r.records()[0]["state"] != "online" {
		t.Fatalf("filtered field missing: %s", r.raw)
	}
	// LIF discovery as Trident does it.
	r = a.must(200, "GET", "/api/network/ip/interfaces?services=data_nfs&svm.uuid="+a.svmUUID()+"&fields=ip.address,state", nil)
	if recs := r.records(); len(recs) != 1 || dig(recs[0], "ip.address") != "127.0.0.10" || recs[0]["state"] != "up" {
		t.Fatalf("NFS LIFs: %s", r.raw)
	}
	r = a.must(200, "GET", "/api/network/ip/interfaces?services=data_iscsi&svm.uuid="+a.svmUUID()+"&fields=ip.address,location.node.name", nil)
	if len(r.records()) != 2 {
		t.Fatalf("iSCSI LIFs: %s", r.raw)
	}
}

func TestQueryParameterValidation(t *testing.T) {
	a := newTestSim(t, Config{})
	tests := []struct {
		method, path string
		body         any
		status, code int
	}{
		{"GET", "/api/storage/volumes?bogus=1", nil, 400, codeUnexpectedArgument},
		{"GET", "/api/storage/volumes?return_timeout=600", nil, 400, codeInvalidValue},
		{"GET", "/api/storage/volumes?max_records=0", nil, 400, codeInvalidValue},
		{"GET", "/api/storage/volumes?return_records=maybe", nil, 400, codeInvalidValue},
		{"GET", "/api/storage/volumes?order_by=bogus", nil, 400, 262268},
		{"GET", "/api/cluster?name=x", nil, 400, codeUnexpectedArgument},
		{"POST", "/api/storage/volumes?name=x", map[string]any{}, 400, codeNoFilterOnPOST},
		{"POST", "/api/storage/volumes?bogus=1", map[string]any{}, 400, codeUnexpectedArgument},
		{"DELETE", "/api/protocols/san/igroups/x?force=true", nil, 400, codeUnexpectedArgument},
		{"PUT", "/api/storage/volumes", nil, 405, codeNotSupported},
		{"GET", "/api/storage/nothing", nil, 400, codeInvalidURL},
		{"GET", "/api/cluster/jobs/gone", nil, 404, codeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			a.t = t
			a.wantErr(tt.status, tt.code, tt.method, tt.path, tt.body)
		})
	}
	a.t = t
	// Empty collections are 200 with zero records, never 404.
	r := a.must(200, "GET", "/api/snapmirror/relationships?list_destinations_only=true&fields=source.path", nil)
	if r.body["num_records"] != float64(0) || len(r.records()) != 0 || r.body["records"] == nil {
		t.Fatalf("empty collection: %s", r.raw)
	}
}

func TestPaging(t *testing.T) {
	a := newTestSim(t, Config{})
	for i := 0; i < 5; i++ {
		a.createVolume(map[string]any{"name": fmt.Sprintf("page%d", i), "guarantee": map[string]any{"type": "none"}})
	}
	// Follow _links.next like Trident: until absent, collecting records.
	seen := map[string]bool{}
	next := "/api/storage/volumes?name=page*&max_records=2&fields=size"
	pages := 0
	for next != "" {
		r := a.must(200, "GET", next, nil)
		pages++
		for _, rec := range r.records() {
			if seen[rec["name"].(string)] || rec["size"] == nil {
				t.Fatalf("duplicate or incomplete record on page %d: %v", pages, rec)
			}
			seen[rec["name"].(string)] = true
		}
		next = ""
		if h, ok := dig(r.body, "_links.next.href").(string); ok {
			next = h
			if !strings.Contains(r.header.Get("Link"), `rel="next"`) {
				t.Fatal("Link header missing")
			}
			u, _ := url.Parse(h)
			if u.Query().Get("name") != "page*" || u.Query().Get("start.uuid") == "" {
				t.Fatalf("next href %q", h)
			}
		}
	}
	if len(seen) != 5 || pages != 3 {
		t.Fatalf("%d records over %d pages", len(seen), pages)
	}
	// order_by pages by offset.
	r := a.must(200, "GET", "/api/storage/volumes?name=page*&order_by=name%20desc&max_records=3", nil)
	if recs := r.records(); recs[0]["name"] != "page4" || recs[2]["name"] != "page2" {
		t.Fatalf("order_by desc: %s", r.raw)
	}
	r = a.must(200, "GET", dig(r.body, "_links.next.href").(string), nil)
	if recs := r.records(); len(recs) != 2 || recs[0]["name"] != "page1" {
		t.Fatalf("second ordered page: %s", r.raw)
	}
	// return_records=false: just the count.
	r = a.must(200, "GET", "/api/storage/volumes?name=page*&return_records=false", nil)
	if r.body["num_records"] != float64(5) || r.body["records"] != nil {
		t.Fatalf("return_records=false: %s", r.raw)
	}
}

func TestMalformedBodies(t *testing.T) {
	a := newTestSim(t, Config{})
	for _, body := range []string{`{`, `[]`, `"x"`, `{"name":}`, `{"a":1} {"b":2}`, "\x00"} {
		t.Run(body, func(t *testing.T) {
			a.t = t
			r := a.do("POST", "/api/storage/volumes", body)
			if r.status != 400 || (r.errCode() != "262199" && r.errCode() != "262200") {
				t.Fatalf("body %q: %d %s", body, r.status, r.raw)
			}
		})
	}
	a.t = t
	a.wantErr(400, codeInvalidValue, "POST", "/api/storage/volumes", `{"name":5,"svm":{"name":"svm0"}}`)
	a.wantErr(400, codeInvalidValue, "POST", "/api/storage/volumes", `{"name":"v","svm":{"name":"svm0"},"aggregates":[{"name":"aggr1"}],"size":1e400}`)
	a.wantErr(400, codeInvalidValue, "POST", "/api/storage/volumes", `{"name":"v","svm":{"name":"svm0"},"aggregates":[{"name":"aggr1"}],"size":"99999999999PB"}`)
	a.wantErr(400, codeInvalidValue, "POST", "/api/storage/volumes", `{"name":"v","svm":{"name":"svm0"},"aggregates":{"name":"aggr1"}}`)
}
