package ontapsim

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func TestParseFaults(t *testing.T) {
	tests := []struct {
		spec string
		want []FaultRule
		err  string
	}{
		{"", nil, ""},
		{"POST /storage/volumes=0.2:503", []FaultRule{{Method: "POST", Path: "/storage/volumes", Rate: 0.2, Kind: FaultUnavailable}}, ""},
		{"*=0.1:eof", []FaultRule{{Path: "*", Rate: 0.1, Kind: FaultDrop}}, ""},
		{"PATCH /api/storage/volumes/{uuid}=0.5:429:2", []FaultRule{{Method: "PATCH", Path: "/api/storage/volumes/{uuid}", Rate: 0.5, Kind: FaultThrottle, RetryAfter: 2}}, ""},
		{"DELETE /storage/volumes/{uuid}=1:job:524486@1, GET /cluster=1:locked",
			[]FaultRule{{Method: "DELETE", Path: "/storage/volumes/{uuid}", Rate: 1, Kind: FaultJob, Code: 524486, Limit: 1},
				{Method: "GET", Path: "/cluster", Rate: 1, Kind: FaultLocked}}, ""},
		{"/protocols/san/*=1:eof-after", []FaultRule{{Path: "/protocols/san/*", Rate: 1, Kind: FaultDropAfterCommit}}, ""},
		{"POST /storage/volumes", nil, "want [METHOD ]PATH=RATE:KIND"},
		{"PUT /x=1:503", nil, "method"},
		{"storage=1:503", nil, "absolute"},
		{"*=1.5:503", nil, "rate"},
		{"*=1", nil, "missing kind"},
		{"*=1:boom", nil, "kind"},
		{"*=1:job", nil, "needs a code"},
		{"*=1:job:x", nil, "job code"},
		{"*=1:503:7", nil, "unexpected argument"},
		{"*=1:503@0", nil, "limit"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := ParseFaults(tt.spec)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, %v", got, err)
			}
			// String renders the same syntax back.
			again, err := ParseFaults(faultSpec(got))
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("round trip %q: %+v %v", faultSpec(got), again, err)
			}
		})
	}
}

// faultAPI uses a client without keep-alives: Go's transport silently
// retries idempotent requests whose reused connection broke, which would
// hide the injected drops.
func faultAPI(t *testing.T, cfg Config) *testAPI {
	a := newTestSim(t, cfg)
	a.hc = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	return a
}

func volBody(name string) map[string]any {
	return map[string]any{"name": name, "svm": map[string]any{"name": "svm0"}, "aggregates": []any{map[string]any{"name": "aggr1"}},
		"guarantee": map[string]any{"type": "none"}}
}

// faultSim is one simulator that a sequence of subtests injects faults into;
// its fault counters add up over all of them.
type faultSim struct{ a *testAPI }

// run runs check as subtest name with spec as the only fault rules.
func (f *faultSim) run(t *testing.T, name, spec string, check func(t *testing.T)) {
	t.Run(name, func(t *testing.T) {
		f.a.t = t
		rules, err := ParseFaults(spec)
		if err != nil {
			t.Fatal(err)
		}
		f.a.sim.SetFaults(rules)
		check(t)
	})
	f.a.t = t
}

// rawDo sends one request and reports only whether the connection failed.
func (f *faultSim) rawDo(t *testing.T, method, path string, body map[string]any) error {
	t.Helper()
	req, _ := http.NewRequest(method, f.a.base+path, strings.NewReader(mustJSON(t, body)))
	req.SetBasicAuth(f.a.user, f.a.pass)
	res, err := f.a.hc.Do(req)
	if err == nil {
		res.Body.Close()
	}
	return err
}

func TestFaultKinds(t *testing.T) {
	f := &faultSim{a: faultAPI(t, Config{})}
	checkErrorReplyFaults(t, f)
	checkDropFaults(t, f)
	checkJobFaults(t, f)
	f.run(t, "limit and prefix", "* /protocols/san/*=1:503@2", func(t *testing.T) {
		f.a.must(200, "GET", "/api/storage/volumes", nil)
		f.a.wantErr(503, codeResourceLimit, "GET", "/api/protocols/san/igroups", nil)
		f.a.wantErr(503, codeResourceLimit, "GET", "/api/protocols/san/lun-maps", nil)
		f.a.must(200, "GET", "/api/protocols/san/igroups", nil)
	})
	if st := f.a.sim.Stats(); st.Faults < 9 || st.Endpoints["POST /api/storage/volumes"].Faults < 5 {
		t.Fatalf("fault counters %+v", st)
	}
}

// checkErrorReplyFaults checks the faults that answer with an ONTAP error
// instead of running the request.
func checkErrorReplyFaults(t *testing.T, f *faultSim) {
	a := f.a
	f.run(t, "429 before the change", "POST /storage/volumes=1:429:3", func(t *testing.T) {
		r := a.wantErr(429, codeTooManyRequests, "POST", "/api/storage/volumes?return_timeout=10", volBody("f429"))
		if r.header.Get("Retry-After") != "3" {
			t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
		}
		if _, ok := a.sim.Volume("f429"); ok {
			t.Fatal("state changed")
		}
	})
	f.run(t, "503", "POST /api/storage/volumes=1:503", func(t *testing.T) {
		a.wantErr(503, codeResourceLimit, "POST", "/api/storage/volumes", volBody("f503"))
	})
	f.run(t, "locked", "PATCH /storage/volumes/{uuid}=1:locked", func(t *testing.T) {
		r := a.wantErr(503, codeInUse, "PATCH", "/api/storage/volumes/"+a.volumeUUID("svm0_root"), map[string]any{"comment": "x"})
		if !strings.Contains(r.errMessage(), "temporarily locked") {
			t.Fatal(r.raw)
		}
	})
}

// checkDropFaults checks that a dropped connection leaves the state alone
// and a drop after commit does not.
func checkDropFaults(t *testing.T, f *faultSim) {
	f.run(t, "drop before the change", "POST /storage/volumes=1:eof", func(t *testing.T) {
		if err := f.rawDo(t, "POST", "/api/storage/volumes?return_timeout=10", volBody("feof")); err == nil {
			t.Fatal("want a connection error")
		}
		if _, ok := f.a.sim.Volume("feof"); ok {
			t.Fatal("state changed")
		}
	})
	f.run(t, "drop after commit", "POST /storage/volumes=1:eof-after", func(t *testing.T) {
		if err := f.rawDo(t, "POST", "/api/storage/volumes?return_timeout=10", volBody("fafter")); err == nil {
			t.Fatal("want a connection error")
		}
		if _, ok := f.a.sim.Volume("fafter"); !ok {
			t.Fatal("the request should have taken effect")
		}
	})
}

// checkJobFaults checks a job fault on an endpoint that answers with a job
// and on one that answers synchronously with the job's error.
func checkJobFaults(t *testing.T, f *faultSim) {
	a := f.a
	f.run(t, "job failure on an async endpoint", "POST /storage/volumes=1:job:524486", func(t *testing.T) {
		r := a.must(202, "POST", "/api/storage/volumes", volBody("fjob"))
		j := waitJob(t, a, r)
		if j["state"] != "failure" || j["code"] != float64(524486) {
			t.Fatalf("job %v", j)
		}
		a.sim.SetFaults(nil)
		if _, ok := a.sim.Volume("fjob"); ok {
			t.Fatal("failed job changed state")
		}
		// The name was not left reserved.
		a.must(201, "POST", "/api/storage/volumes?return_timeout=10", volBody("fjob"))
	})
	f.run(t, "job failure on a sync endpoint", "POST /protocols/san/igroups=1:job:5374023", func(t *testing.T) {
		a.wantErr(409, codeIgroupExists, "POST", "/api/protocols/san/igroups", map[string]any{"name": "g", "os_type": "linux", "svm": map[string]any{"name": "svm0"}})
		if len(a.sim.IGroups()) != 0 {
			t.Fatal("state changed")
		}
	})
}

func TestFaultRateIsSeeded(t *testing.T) {
	run := func() int64 {
		rules, _ := ParseFaults("GET /cluster=0.3:503")
		a := faultAPI(t, Config{Seed: 42, Faults: rules})
		for i := 0; i < 200; i++ {
			a.do("GET", "/api/cluster", nil)
		}
		return a.sim.Stats().Faults
	}
	first, second := run(), run()
	if first != second {
		t.Fatalf("same seed, different faults: %d vs %d", first, second)
	}
	if first < 30 || first > 90 {
		t.Fatalf("%d faults of 200 at rate 0.3", first)
	}
}
