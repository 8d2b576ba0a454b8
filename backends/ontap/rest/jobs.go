package rest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Job states (docs/design/ontap-rest.md §2.5).
const (
	jobQueued  = "queued"
	jobRunning = "running"
	jobPaused  = "paused"
	jobSuccess = "success"
	jobFailure = "failure"
)

// job is the part of GET /cluster/jobs/{uuid} the client needs.
type job struct {
	UUID        string    `json:"uuid"`
	Description string    `json:"description"`
	State       string    `json:"state"`
	Message     string    `json:"message"`
	Code        apiCode   `json:"code"`
	Error       *apiError `json:"error"` // newer releases fill it besides message/code
}

// decodeJobRef returns the job UUID of a 202 response body
// ({"job":{"uuid":"…","_links":…}}).
func decodeJobRef(body []byte) (string, error) {
	var env struct {
		Job *struct {
			UUID string `json:"uuid"`
		} `json:"job"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return "", fmt.Errorf("decoding job reference: %w", err)
	}
	if env.Job == nil || env.Job.UUID == "" {
		return "", errors.New("202 response carries no job uuid")
	}
	if !validPathSegment(env.Job.UUID) {
		return "", fmt.Errorf("job uuid %q is not a plain identifier", env.Job.UUID)
	}
	return env.Job.UUID, nil
}

// decodeJob parses a job record and checks that its state is one ONTAP
// documents, so that a garbled reply fails instead of being polled forever.
func decodeJob(body []byte) (*job, error) {
	var j job
	if err := json.Unmarshal(body, &j); err != nil {
		return nil, fmt.Errorf("decoding job: %w", err)
	}
	switch j.State {
	case jobQueued, jobRunning, jobPaused, jobSuccess, jobFailure:
		return &j, nil
	}
	return nil, fmt.Errorf("job %q has unknown state %q", j.UUID, j.State)
}

func (j *job) terminal() bool { return j.State == jobSuccess || j.State == jobFailure }

// failure returns the classified error of a failed job, or nil on success.
// method and endpoint are those of the call that started the job.
func (j *job) failure(method, endpoint string) error {
	if j.State != jobFailure {
		return nil
	}
	code, msg := string(j.Code), j.Message
	if j.Error != nil {
		if j.Error.Code != "" {
			code = string(j.Error.Code)
		}
		if j.Error.Message != "" {
			msg = j.Error.Message
		}
	}
	// Old releases report code 0 next to a failure message.
	if code == "0" {
		code = ""
	}
	msg = truncateMessage(msg)
	if msg == "" {
		msg = "job failed"
	}
	return &Error{
		Class:    classify(method, 0, code),
		Endpoint: endpoint,
		Code:     code,
		Message:  msg,
		JobUUID:  j.UUID,
	}
}

// waitJob polls a job until it is terminal, with a short doubling backoff
// (JobPollInitial up to JobPollMax), bounded only by ctx. The first poll
// comes after JobPollInitial because return_timeout already gave the job its
// chance to finish within the original request.
func (c *Client) waitJob(ctx context.Context, method, endpoint, uuid string) error {
	delay := c.cfg.JobPollInitial
	for {
		if err := c.sleep(ctx, delay); err != nil {
			return c.ctxError(endpoint, err)
		}
		res, err := c.do(ctx, &call{
			method:   http.MethodGet,
			endpoint: "/cluster/jobs/{uuid}",
			path:     "/cluster/jobs/" + url.PathEscape(uuid),
		})
		if err != nil {
			if IsNotFound(err) {
				// Terminal jobs are kept ~300 s; a job that vanished earlier
				// leaves the outcome unknown.
				return &Error{Class: ClassUnknown, Endpoint: method + " " + endpoint, JobUUID: uuid,
					Message: "job disappeared before it was seen to finish"}
			}
			return err
		}
		j, err := decodeJob(res.body)
		if err != nil {
			return &Error{Class: ClassUnknown, Endpoint: method + " " + endpoint, JobUUID: uuid, Message: err.Error()}
		}
		if j.terminal() {
			return j.failure(method, method+" "+endpoint)
		}
		delay = min(2*delay, c.cfg.JobPollMax)
	}
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
