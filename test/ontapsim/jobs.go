package ontapsim

import (
	"net/http"
	"strconv"
	"time"
)

const (
	jobQueued  = "queued"
	jobRunning = "running"
	jobSuccess = "success"
	jobFailure = "failure"
)

// job is an ONTAP cluster job (docs/design/ontap-rest.md §2.5). Fields are guarded by
// Simulator.mu; done is closed once the job is terminal.
type job struct {
	UUID        string
	Description string
	SVMName     string
	SVMUUID     string
	State       string
	Message     string
	Code        int
	Err         *apiError
	Start, End  time.Time
	done        chan struct{}
}

var jobResource = &resource{
	schema: newSchema(`uuid description state message code start_time end_time error.code error.message
		svm.name svm.uuid _links`),
	keys:    []string{"uuid"},
	sortKey: "uuid",
}

// startJob registers a job for the operation of c and runs it in the
// background: queued for the first tenth of dur, running for the rest, then
// commit is applied under mu (unless a job fault was injected) and the job
// ends in success or failure. release, if set, runs under mu after either
// outcome. Called with mu held.
func (s *Simulator) startJob(c *call, svm *svmState, dur time.Duration, commit func() *apiError, release func()) *job {
	s.gcJobsLocked()
	j := &job{
		UUID:        newUUID(),
		Description: c.r.Method + " " + c.r.URL.Path,
		State:       jobQueued,
		Message:     "Queued",
		Start:       time.Now(),
		done:        make(chan struct{}),
	}
	if svm != nil {
		j.SVMName, j.SVMUUID = svm.Name, svm.UUID
	}
	s.jobs[j.UUID] = j
	s.stats.job(dur)
	fault := c.fault
	c.fault = nil
	s.jobWG.Add(1)
	go func() {
		defer s.jobWG.Done()
		queued := dur / 10
		s.sleep(queued)
		s.mu.Lock()
		j.State, j.Message = jobRunning, "Running"
		s.mu.Unlock()
		s.sleep(dur - queued)

		s.mu.Lock()
		var err *apiError
		if fault != nil {
			err = injectedJobError(fault.Code)
		} else {
			err = commit()
		}
		if release != nil {
			release()
		}
		j.End = time.Now()
		if err != nil {
			j.State, j.Message, j.Code, j.Err = jobFailure, err.Message, err.jobCode(), err
		} else {
			j.State, j.Message, j.Code = jobSuccess, "success", 0
		}
		_ = s.saveLocked()
		s.mu.Unlock()
		close(j.done)
	}()
	return j
}

// gcJobsLocked forgets terminal jobs older than the retention (300 s on
// ONTAP); a GET of such a job is a 404 code 4.
func (s *Simulator) gcJobsLocked() {
	cutoff := time.Now().Add(-s.cfg.JobRetention)
	for id, j := range s.jobs {
		if (j.State == jobSuccess || j.State == jobFailure) && j.End.Before(cutoff) {
			delete(s.jobs, id)
		}
	}
}

func formatTime(t time.Time) string { return t.Format("2006-01-02T15:04:05-07:00") }

func (j *job) render() map[string]any {
	rec := map[string]any{
		"uuid":        j.UUID,
		"description": j.Description,
		"state":       j.State,
		"message":     j.Message,
		"code":        j.Code,
		"start_time":  formatTime(j.Start),
		"_links":      selfLink("/api/cluster/jobs/" + j.UUID),
	}
	if !j.End.IsZero() {
		rec["end_time"] = formatTime(j.End)
	}
	if j.Err != nil {
		rec["error"] = map[string]any{"code": strconv.Itoa(j.Code), "message": j.Message}
	}
	if j.SVMUUID != "" {
		rec["svm"] = map[string]any{"name": j.SVMName, "uuid": j.SVMUUID}
	}
	return rec
}

func (s *Simulator) getJobs(c *call) (*reply, *apiError) {
	s.gcJobsLocked()
	recs := make([]map[string]any, 0, len(s.jobs))
	for _, j := range s.jobs {
		recs = append(recs, j.render())
	}
	return c.list(jobResource, recs)
}

func (s *Simulator) getJob(c *call) (*reply, *apiError) {
	s.gcJobsLocked()
	j := s.jobs[c.params["uuid"]]
	if j == nil {
		return nil, errNotFound(codeNotFound, "uuid", "entry doesn't exist")
	}
	return c.instance(jobResource, j.render())
}

// asyncReply is the 202 a handler returns for an operation run as a job.
func asyncReply(j *job, location string, records ...map[string]any) *reply {
	return &reply{status: http.StatusAccepted, job: j, location: location, records: records}
}
