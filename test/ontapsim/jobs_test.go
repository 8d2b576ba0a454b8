package ontapsim

import (
	"testing"
	"time"
)

func TestJobLifecycle(t *testing.T) {
	// A volume create that takes 1.5 s: long enough that the first poll,
	// right after the 202, sees a non-terminal state.
	lat := LatencyModel{VolumeCreate: Range{1500 * time.Millisecond, 1500 * time.Millisecond}}
	a := newTestSim(t, Config{Latency: lat})
	body := map[string]any{"name": "slow", "svm": map[string]any{"name": "svm0"}, "aggregates": []any{map[string]any{"name": "aggr1"}},
		"guarantee": map[string]any{"type": "none"}}
	r := a.must(202, "POST", "/api/storage/volumes?return_records=true", body)
	if r.header.Get("Location") != "/api/storage/volumes/?name=slow" {
		t.Fatalf("Location %q", r.header.Get("Location"))
	}
	if recs := r.records(); len(recs) != 1 || recs[0]["name"] != "slow" {
		t.Fatalf("return_records on async create: %s", r.raw)
	}
	href := dig(r.body, "job._links.self.href").(string)
	order := map[string]int{"queued": 0, "running": 1, "success": 2}
	var states []string
	for {
		j := a.must(200, "GET", href+"?fields=state", nil).body
		st := j["state"].(string)
		if len(states) == 0 || states[len(states)-1] != st {
			states = append(states, st)
		}
		if st == "success" || st == "failure" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if states[0] == "success" || states[len(states)-1] != "success" {
		t.Fatalf("states %v", states)
	}
	for i := 1; i < len(states); i++ {
		if order[states[i]] <= order[states[i-1]] {
			t.Fatalf("states not monotonic: %v", states)
		}
	}
	j := a.must(200, "GET", href, nil).body
	if j["description"] != "POST /api/storage/volumes" || j["code"] != float64(0) || j["message"] != "success" ||
		j["start_time"] == nil || j["end_time"] == nil || dig(j, "svm.name") != "svm0" {
		t.Fatalf("job record %v", j)
	}
	// Collection with filters.
	if jl := a.must(200, "GET", "/api/cluster/jobs?state=success&fields=description", nil); len(jl.records()) != 1 {
		t.Fatalf("jobs list: %s", jl.raw)
	}

	// return_timeout shorter than the job: still 202; longer: 201 in one trip.
	body["name"] = "slow2"
	a.must(202, "POST", "/api/storage/volumes?return_timeout=1", body)
	body["name"] = "slow3"
	r = a.must(201, "POST", "/api/storage/volumes?return_timeout=30", body)
	if dig(r.body, "job.uuid") == nil {
		t.Fatalf("201 body must carry the job: %s", r.raw)
	}
	if _, ok := a.sim.Volume("slow3"); !ok {
		t.Fatal("volume missing after 201")
	}
	// A failed job within return_timeout is returned as the error itself.
	a.wantErr(409, codeVolDuplicate, "POST", "/api/storage/volumes?return_timeout=30", body)
	var failed *JobInfo
	for _, jb := range a.sim.Jobs() {
		if jb.State == "failure" {
			failed = &jb
		}
	}
	if failed == nil || failed.Code != codeVolDuplicate {
		t.Fatalf("failed job not recorded: %+v", a.sim.Jobs())
	}
	fj := a.must(200, "GET", "/api/cluster/jobs/"+failed.UUID, nil).body
	if fj["state"] != "failure" || fj["code"] != float64(codeVolDuplicate) || dig(fj, "error.code") != "917526" || fj["message"] == "" {
		t.Fatalf("failed job record: %v", fj)
	}
}

func TestJobRetention(t *testing.T) {
	a := newTestSim(t, Config{JobRetention: time.Millisecond})
	r := a.must(200, "PATCH", "/api/storage/volumes/"+a.volumeUUID("svm0_root")+"?return_timeout=10", map[string]any{"comment": "x"})
	href := dig(r.body, "job._links.self.href").(string)
	time.Sleep(10 * time.Millisecond)
	a.wantErr(404, codeNotFound, "GET", href, nil)
}

func TestInjectedLatencyIsAccounted(t *testing.T) {
	ms := time.Millisecond
	lat := LatencyModel{Request: Range{5 * ms, 5 * ms}, SyncMutation: Range{7 * ms, 7 * ms}, VolumeCreate: Range{50 * ms, 50 * ms}}
	a := newTestSim(t, Config{Latency: lat})
	a.sim.ResetStats()
	a.createVolume(map[string]any{"name": "l", "guarantee": map[string]any{"type": "none"}}) // POST (5 + job 50) + GET (5)
	a.createIgroup("g")                                                                      // 7
	st := a.sim.Stats()
	if st.Requests != 3 || st.Jobs != 1 || st.JobTime != 50*ms || st.Injected != 67*ms {
		t.Fatalf("stats %+v", st)
	}
	if st.Count("POST", "/api/storage/volumes") != 1 || st.Endpoints["POST /api/protocols/san/igroups"].Injected != 7*ms {
		t.Fatalf("per-endpoint stats %+v", st.Endpoints)
	}
	if RealisticLatency().VolumeCreate.Min != 800*ms {
		t.Fatal("realistic figures changed")
	}
}
