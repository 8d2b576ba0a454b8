package rest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// These tests pin down how the client reads odd but legal responses and how
// it retries, against tiny httptest servers: a job that stays running for
// exactly N polls, a next link to another host, a request counter at the
// concurrency cap. Whole flows, and each fault kind, run against the
// simulator (sim_test.go, fault_test.go).

type sleepRecorder struct {
	mu     sync.Mutex
	sleeps []time.Duration
}

func (r *sleepRecorder) sleep(ctx context.Context, d time.Duration) error {
	r.mu.Lock()
	r.sleeps = append(r.sleeps, d)
	r.mu.Unlock()
	return ctx.Err()
}

func (r *sleepRecorder) all() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.sleeps...)
}

// newTestClient returns a client of the server at rawURL whose waits are
// recorded instead of slept.
func newTestClient(t *testing.T, rawURL string, edit func(*ClientConfig)) (*Client, *sleepRecorder) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ClientConfig{ManagementLIF: u.Host, Scheme: u.Scheme, SVM: "svm0", Username: "admin", Password: "s3cr3t-pw"}
	if edit != nil {
		edit(&cfg)
	}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	rec := &sleepRecorder{}
	c.sleep = rec.sleep
	return c, rec
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/hal+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// dropConnection closes the connection without answering: the client sees
// EOF after having sent the request.
func dropConnection(t *testing.T, w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	conn.Close()
}

func TestJobPolledUntilTerminal(t *testing.T) {
	var polls atomic.Int32
	var gotReturnTimeout string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "PATCH" && r.URL.Path == "/api/storage/volumes/v1":
			gotReturnTimeout = r.URL.Query().Get("return_timeout")
			writeJSON(w, 202, map[string]any{"job": map[string]any{"uuid": "j1", "_links": map[string]any{"self": map[string]string{"href": "/api/cluster/jobs/j1"}}}})
		case r.Method == "GET" && r.URL.Path == "/api/cluster/jobs/j1":
			state := "running"
			if polls.Add(1) >= 3 {
				state = "success"
			}
			writeJSON(w, 200, map[string]any{"uuid": "j1", "state": state, "message": state, "code": 0})
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
	}))
	defer srv.Close()
	c, rec := newTestClient(t, srv.URL, func(c *ClientConfig) { c.ReturnTimeout = 7 * time.Second })
	if err := c.ModifyVolume(context.Background(), "v1", VolumeModify{Comment: new("x")}); err != nil {
		t.Fatal(err)
	}
	if polls.Load() != 3 {
		t.Errorf("polled %d times, want 3", polls.Load())
	}
	if gotReturnTimeout != "7" {
		t.Errorf("return_timeout = %q, want 7", gotReturnTimeout)
	}
	want := []time.Duration{defaultJobPollInitial, 2 * defaultJobPollInitial, 4 * defaultJobPollInitial}
	if got := rec.all(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("poll waits = %v, want %v", got, want)
	}
}

func TestFinishedWithinReturnTimeoutIsOneRoundTrip(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		// The job finished within return_timeout: 200 with the job link.
		writeJSON(w, 200, map[string]any{"job": map[string]any{"uuid": "j1"}})
	}))
	defer srv.Close()
	c, _ := newTestClient(t, srv.URL, nil)
	if err := c.ModifyVolume(context.Background(), "v1", VolumeModify{Size: new(int64(1 << 30))}); err != nil {
		t.Fatal(err)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestJobFailureIsClassified(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case "DELETE":
			writeJSON(w, 202, map[string]any{"job": map[string]any{"uuid": "j9"}})
		case "GET":
			writeJSON(w, 200, map[string]any{"uuid": "j9", "state": "failure",
				"message": "Failed to delete volume because it has one or more clones.", "code": 524615})
		}
	}))
	defer srv.Close()
	c, _ := newTestClient(t, srv.URL, nil)
	err := c.DeleteVolume(context.Background(), "v1", true)
	var e *Error
	if !errors.As(err, &e) || !IsInUse(err) || e.Code != "524615" || e.JobUUID != "j9" || e.Endpoint != "DELETE /storage/volumes/{uuid}" {
		t.Fatalf("got %#v", err)
	}
	if !strings.Contains(err.Error(), "one or more clones") {
		t.Errorf("ONTAP message lost: %v", err)
	}
}

func TestRetryOn429HonoursRetryAfterAnd503(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1:
			w.Header().Set("Retry-After", "3")
			writeJSON(w, 429, map[string]any{"error": map[string]string{"message": "Too many requests", "code": "262160"}})
		case 2:
			writeJSON(w, 503, map[string]any{"error": map[string]string{"message": "busy", "code": "7"}})
		default:
			writeJSON(w, 200, map[string]any{"name": "c1", "uuid": "u", "version": map[string]any{"generation": 9, "major": 15, "minor": 1, "full": "NetApp Release 9.15.1"}})
		}
	}))
	defer srv.Close()
	c, rec := newTestClient(t, srv.URL, func(c *ClientConfig) { c.RetryBaseDelay = time.Millisecond; c.RetryMaxDelay = 2 * time.Millisecond })
	cl, err := c.cluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cl.Version.String() != "9.15.1" || !cl.Version.atLeast(9, 12, 1) || cl.Version.atLeast(9, 16, 0) {
		t.Errorf("version %v", cl.Version)
	}
	sleeps := rec.all()
	if len(sleeps) != 2 || sleeps[0] != 3*time.Second || sleeps[1] > 2*time.Millisecond {
		t.Errorf("waits = %v, want [3s, ≤2ms]", sleeps)
	}
}

func TestRetryAfterIsCapped(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", "600")
			w.WriteHeader(429)
			return
		}
		writeJSON(w, 200, map[string]any{})
	}))
	defer srv.Close()
	c, rec := newTestClient(t, srv.URL, func(c *ClientConfig) { c.MaxRetryAfter = 5 * time.Second })
	if _, err := c.cluster(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := rec.all(); len(got) != 1 || got[0] != 5*time.Second {
		t.Errorf("waits = %v, want [5s]", got)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"": 0, "2": 2 * time.Second, "-1": 0, "x": 0,
		now.Add(10 * time.Second).Format(http.TimeFormat): 10 * time.Second,
		now.Add(-time.Minute).Format(http.TimeFormat):     0,
	} {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestGiveUpAfterMaxAttempts(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		writeJSON(w, 503, map[string]any{"error": map[string]string{"message": "overloaded", "code": "7"}})
	}))
	defer srv.Close()
	c, _ := newTestClient(t, srv.URL, func(c *ClientConfig) { c.MaxAttempts = 4 })
	_, err := c.cluster(context.Background())
	if ClassOf(err) != ClassThrottled || n.Load() != 4 {
		t.Fatalf("err = %v after %d requests, want throttled after 4", err, n.Load())
	}
}

func TestNoRetryOnAuthFailureAndNoSecretsInErrors(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if u, p, ok := r.BasicAuth(); !ok || u != "admin" || p != "s3cr3t-pw" {
			t.Errorf("basic auth = %q %q %v", u, p, ok)
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="ontap"`)
		w.WriteHeader(401)
	}))
	defer srv.Close()
	c, _ := newTestClient(t, srv.URL, nil)
	_, err := c.cluster(context.Background())
	if ClassOf(err) != ClassAuth || n.Load() != 1 {
		t.Fatalf("err = %v after %d requests, want auth after 1", err, n.Load())
	}
	if strings.Contains(err.Error(), "s3cr3t-pw") || strings.Contains(fmt.Sprintf("%#v", c.cfg), "s3cr3t-pw") {
		t.Fatal("password leaked")
	}
}

func TestConnectionDropRetriedForGET(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			dropConnection(t, w)
			return
		}
		writeJSON(w, 200, map[string]any{"records": []any{}, "num_records": 0})
	}))
	defer srv.Close()
	c, _ := newTestClient(t, srv.URL, nil)
	c.svmUUID = "svm-uuid"
	_, err := c.GetVolume(context.Background(), "vol1")
	if !IsNotFound(err) {
		t.Fatalf("err = %v, want not found (0 records)", err)
	}
	if n.Load() != 2 {
		t.Errorf("%d requests, want 2", n.Load())
	}
}

// A POST whose connection drops after ONTAP committed it is resent; ONTAP
// then reports a duplicate, which the client resolves by finding the object.
func TestAmbiguousCreateResolvedByLookup(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "POST":
			if posts.Add(1) == 1 {
				dropConnection(t, w) // committed, answer lost
				return
			}
			writeJSON(w, 409, map[string]any{"error": map[string]string{"message": "An igroup with the same name already exists", "code": "5374023"}})
		case r.Method == "GET":
			writeJSON(w, 200, map[string]any{"num_records": 1, "records": []any{map[string]any{
				"uuid": "ig-1", "name": "node1", "os_type": "linux", "protocol": "iscsi"}}})
		}
	}))
	defer srv.Close()
	c, _ := newTestClient(t, srv.URL, nil)
	c.svmUUID = "svm-uuid"
	ig, err := c.CreateIgroup(context.Background(), "node1")
	if err != nil || ig.UUID != "ig-1" {
		t.Fatalf("CreateIgroup = %+v, %v", ig, err)
	}
	// Without an ambiguous attempt the same answer is a real conflict.
	posts.Store(1)
	if _, err := c.CreateIgroup(context.Background(), "node1"); !IsAlreadyExists(err) {
		t.Fatalf("err = %v, want already exists", err)
	}
}

// CreateLUNMap passes on the reporting nodes of ONTAP's answer; without
// them in it they are unknown (nil), not none.
func TestCreateLUNMapReportingNodes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		record map[string]any
		want   []string
	}{
		{"in the answer", map[string]any{"reporting_nodes": []any{map[string]any{"name": "n1", "uuid": "u1"}, map[string]any{"name": "n2", "uuid": "u2"}}}, []string{"n1", "n2"}},
		{"not in the answer", map[string]any{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				rec := map[string]any{"lun": map[string]any{"name": "/vol/v/lun0", "uuid": "lun-1"},
					"igroup": map[string]any{"name": "ig", "uuid": "ig-1"}, "logical_unit_number": 3}
				for k, v := range tc.record {
					rec[k] = v
				}
				writeJSON(w, 201, map[string]any{"num_records": 1, "records": []any{rec}})
			}))
			defer srv.Close()
			c, _ := newTestClient(t, srv.URL, nil)
			c.svmUUID = "svm-uuid"
			m, err := c.CreateLUNMap(context.Background(), LUNMapCreate{LUNPath: "/vol/v/lun0", IgroupName: "ig"})
			if err != nil {
				t.Fatal(err)
			}
			if m.LUNID != 3 || !slices.Equal(m.ReportingNodes, tc.want) || (m.ReportingNodes == nil) != (tc.want == nil) {
				t.Errorf("map %+v, want reporting nodes %#v", m, tc.want)
			}
		})
	}
}

// CreateIgroup puts the initiators into the create request.
func TestCreateIgroupWithInitiators(t *testing.T) {
	bodies := make(chan map[string]any, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Error(err)
		}
		bodies <- body
		writeJSON(w, 201, map[string]any{"num_records": 1, "records": []any{map[string]any{
			"uuid": "ig-1", "name": "node1", "initiators": body["initiators"]}}})
	}))
	defer srv.Close()
	c, _ := newTestClient(t, srv.URL, nil)
	c.svmUUID = "svm-uuid"
	ig, err := c.CreateIgroup(context.Background(), "node1", "iqn.1994-05.com.redhat:a", "iqn.1994-05.com.redhat:b")
	if err != nil {
		t.Fatal(err)
	}
	body := <-bodies
	got, _ := json.Marshal(body["initiators"])
	if string(got) != `[{"name":"iqn.1994-05.com.redhat:a"},{"name":"iqn.1994-05.com.redhat:b"}]` {
		t.Errorf("initiators in the body: %s", got)
	}
	if !slices.Equal(ig.Initiators, []string{"iqn.1994-05.com.redhat:a", "iqn.1994-05.com.redhat:b"}) {
		t.Errorf("igroup %+v", ig)
	}
}

func TestAmbiguousDeleteThatGetsNotFoundSucceeds(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			dropConnection(t, w)
			return
		}
		writeJSON(w, 404, map[string]any{"error": map[string]string{"message": "igroup does not exist", "code": "5374852"}})
	}))
	defer srv.Close()
	c, _ := newTestClient(t, srv.URL, nil)
	if err := c.DeleteIgroup(context.Background(), "ig-1"); err != nil {
		t.Fatalf("err = %v", err)
	}
	if err := c.DeleteIgroup(context.Background(), "ig-1"); !IsNotFound(err) {
		t.Fatalf("second delete: err = %v, want not found", err)
	}
}

func TestPaginationFollowsNextOnOurHostOnly(t *testing.T) {
	var pages atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pages.Add(1)
		q := r.URL.Query()
		switch q.Get("start.uuid") {
		case "":
			if q.Get("name") != "trident_*" || q.Get("svm.uuid") != "svm-uuid" {
				t.Errorf("query %v", q)
			}
			writeJSON(w, 200, map[string]any{"num_records": 2, "records": []any{
				map[string]any{"uuid": "1", "name": "trident_a"}, map[string]any{"uuid": "2", "name": "trident_b"}},
				"_links": map[string]any{"next": map[string]string{
					// A next link naming another host must not take us there.
					"href": "https://evil.example/api/storage/volumes?start.uuid=2&name=trident_%2A&max_records=2"}}})
		case "2":
			writeJSON(w, 200, map[string]any{"num_records": 1, "records": []any{map[string]any{"uuid": "3", "name": "trident_c"}},
				"_links": map[string]any{"next": map[string]string{"href": "/api/storage/volumes?start.uuid=3"}}})
		case "3":
			writeJSON(w, 200, map[string]any{"num_records": 0, "records": []any{}})
		}
	}))
	defer srv.Close()
	c, _ := newTestClient(t, srv.URL, nil)
	c.svmUUID = "svm-uuid"
	vols, err := c.ListVolumes(context.Background(), "trident_")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range vols {
		names = append(names, v.Name)
	}
	if strings.Join(names, ",") != "trident_a,trident_b,trident_c" || pages.Load() != 3 {
		t.Errorf("got %v in %d pages", names, pages.Load())
	}
	if _, _, err := c.nextPage("/elsewhere?x=1"); err == nil {
		t.Error("next link outside /api accepted")
	}
}

func TestGetByNameAmbiguity(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"num_records": 2, "records": []any{map[string]any{"uuid": "1", "name": "v"}, map[string]any{"uuid": "2", "name": "v"}}})
	}))
	defer srv.Close()
	c, _ := newTestClient(t, srv.URL, nil)
	c.svmUUID = "svm-uuid"
	if _, err := c.GetVolume(context.Background(), "v"); err == nil || IsNotFound(err) {
		t.Fatalf("err = %v, want an error that is not not-found", err)
	}
}

func TestConcurrencyCapSharedPerLIF(t *testing.T) {
	var inflight, peak atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cur := inflight.Add(1)
		for {
			p := peak.Load()
			if cur <= p || peak.CompareAndSwap(p, cur) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		inflight.Add(-1)
		writeJSON(w, 200, map[string]any{})
	}))
	defer srv.Close()
	// Two clients of one LIF share one cap of 3.
	c1, _ := newTestClient(t, srv.URL, func(c *ClientConfig) { c.MaxConcurrentRequests = 3 })
	c2, _ := newTestClient(t, srv.URL, func(c *ClientConfig) { c.MaxConcurrentRequests = 50 })
	var wg sync.WaitGroup
	for i := 0; i < 24; i++ {
		c := c1
		if i%2 == 1 {
			c = c2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.cluster(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p < 1 || p > 3 {
		t.Fatalf("peak concurrency %d, want 1..3", p)
	}
}

func TestPerRequestTimeoutRetries(t *testing.T) {
	var n atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			<-release // hang until the test ends
			return
		}
		writeJSON(w, 200, map[string]any{})
	}))
	defer srv.Close()
	defer close(release)
	c, _ := newTestClient(t, srv.URL, func(c *ClientConfig) {
		c.ReturnTimeout = time.Second
		c.RequestTimeout = 1100 * time.Millisecond
	})
	if _, err := c.cluster(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 2 {
		t.Errorf("%d requests, want 2", n.Load())
	}
}

func TestContextBoundsTheCall(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 503, map[string]any{})
	}))
	defer srv.Close()
	c, _ := newTestClient(t, srv.URL, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.cluster(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestNewClientValidation(t *testing.T) {
	ok := ClientConfig{ManagementLIF: "10.0.0.1", SVM: "svm0", Username: "u", Password: "p"}
	for name, edit := range map[string]func(*ClientConfig){
		"no svm":             func(c *ClientConfig) { c.SVM = "" },
		"no credentials":     func(c *ClientConfig) { c.Password = "" },
		"bad scheme":         func(c *ClientConfig) { c.Scheme = "ftp" },
		"return timeout":     func(c *ClientConfig) { c.ReturnTimeout = 121 * time.Second },
		"request ≤ return":   func(c *ClientConfig) { c.ReturnTimeout = 30 * time.Second; c.RequestTimeout = 30 * time.Second },
		"bad CA":             func(c *ClientConfig) { c.TrustedCACertificate = []byte("nope") },
		"cert without key":   func(c *ClientConfig) { c.ClientCertificate = []byte("x") },
		"bad management LIF": func(c *ClientConfig) { c.ManagementLIF = "http://x" },
	} {
		cfg := ok
		edit(&cfg)
		if _, err := NewClient(cfg); err == nil {
			t.Errorf("%s: NewClient succeeded", name)
		}
	}
	if _, err := NewClient(ok); err != nil {
		t.Fatal(err)
	}
	s := fmt.Sprintf("%v %+v %#v %s", ok, ok, ok, ok.String())
	if strings.Contains(s, `Password:"p"`) || !strings.Contains(s, "<redacted>") {
		t.Errorf("config printing leaks or does not redact: %s", s)
	}
}

func TestUnixPermissionsWire(t *testing.T) {
	for in, want := range map[string]int{"755": 755, "0777": 777, "0": 0, "1777": 1777} {
		if got, err := unixPermissionsWire(in); err != nil || got != want {
			t.Errorf("unixPermissionsWire(%q) = %d, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "8", "07777", "rwx", "-1"} {
		if _, err := unixPermissionsWire(bad); err == nil {
			t.Errorf("unixPermissionsWire(%q) succeeded", bad)
		}
	}
}

func TestBackoffBounds(t *testing.T) {
	base, limit := 100*time.Millisecond, 5*time.Second
	for attempt := 1; attempt <= 12; attempt++ {
		want := base << (attempt - 1)
		if want > limit {
			want = limit
		}
		for i := 0; i < 20; i++ {
			d := backoff(base, limit, attempt)
			if d < want-want/10 || d > min(want+want/10, limit) {
				t.Fatalf("backoff(attempt %d) = %v, want %v ±10 %% and ≤ %v", attempt, d, want, limit)
			}
		}
	}
}
