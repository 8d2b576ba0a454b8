package ontapsim

import (
	"fmt"
	"strconv"
	"strings"
)

// FaultKind is what an injected fault does to a request.
type FaultKind string

const (
	// FaultThrottle answers 429 code 262160 with Retry-After, before any
	// state change.
	FaultThrottle FaultKind = "429"
	// FaultUnavailable answers 503 code 7, before any state change.
	FaultUnavailable FaultKind = "503"
	// FaultLocked answers 503 code 8 "... temporarily locked ...", before
	// any state change (the transient configuration lock Ansible retries;
	// code 8 is ONTAP's "in use", sent as 503 while transient: docs/design/ontap-rest.md
	// §2.4, §2.6).
	FaultLocked FaultKind = "locked"
	// FaultDrop closes the connection without a response, before any state
	// change: a retry is always safe.
	FaultDrop FaultKind = "eof"
	// FaultDropAfterCommit handles the request completely (the state changes,
	// an async job is started and, with return_timeout, waited for) and then
	// closes the connection instead of answering: the client sees EOF for a
	// request that took effect. Use it to test idempotent retries.
	FaultDropAfterCommit FaultKind = "eof-after"
	// FaultJob makes the operation fail with Code and no state change: an
	// async operation returns its 202 and the job ends in failure; a
	// synchronous one returns the error directly.
	FaultJob FaultKind = "job"
)

// FaultRule injects Kind into a fraction Rate of the requests that match
// Method and Path. Path is an endpoint template as counted in Stats
// ("/api/storage/volumes/{uuid}"; the "/api" prefix is optional), "*" for
// every endpoint, or a prefix ending in "*". Rules are tried in order; the
// first that fires wins.
type FaultRule struct {
	Method     string // "" or "*" = any
	Path       string
	Rate       float64 // 0..1
	Kind       FaultKind
	Code       int // FaultJob: the job/ONTAP error code
	RetryAfter int // FaultThrottle: seconds, default 1
	Limit      int // fire at most Limit times (0 = unlimited)
}

// FaultSyntax documents the --faults grammar.
const FaultSyntax = `SPEC is a comma-separated list of rules:
  [METHOD ]PATH=RATE:KIND[:ARG][@LIMIT]
METHOD   GET, POST, PATCH, DELETE or * (default: any)
PATH     endpoint template as in /sim/stats, with or without /api, e.g.
         /storage/volumes or /api/storage/volumes/{uuid}; * = any; a
         trailing * matches a prefix (/protocols/san/*)
RATE     probability 0..1
KIND     429[:RETRY_AFTER_SECONDS]  throttled, before any state change
         503                        unavailable, before any state change
         locked                     503 code 8 "temporarily locked", before any state change
         eof                        connection closed, before any state change
         eof-after                  request fully processed, then connection closed
         job:CODE                   operation fails with CODE (async: the job fails)
@LIMIT   inject at most LIMIT times
Example: POST /storage/volumes=0.2:503,*=0.1:eof,DELETE /storage/volumes/{uuid}=1:job:524486@1`

// ParseFaults parses the --faults syntax (FaultSyntax). An empty spec is no
// rules.
func ParseFaults(spec string) ([]FaultRule, error) {
	var rules []FaultRule
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		r, err := parseFaultRule(item)
		if err != nil {
			return nil, fmt.Errorf("fault %q: %w", item, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

func parseFaultRule(item string) (FaultRule, error) {
	var r FaultRule
	lhs, rhs, ok := strings.Cut(item, "=")
	if !ok {
		return r, fmt.Errorf("want [METHOD ]PATH=RATE:KIND")
	}
	lhs = strings.TrimSpace(lhs)
	if m, p, ok := strings.Cut(lhs, " "); ok {
		r.Method = strings.ToUpper(strings.TrimSpace(m))
		lhs = strings.TrimSpace(p)
		switch r.Method {
		case "GET", "POST", "PATCH", "DELETE", "*":
		default:
			return r, fmt.Errorf("method %q: want GET, POST, PATCH, DELETE or *", r.Method)
		}
	}
	if lhs == "" {
		return r, fmt.Errorf("empty path")
	}
	if lhs != "*" && !strings.HasPrefix(lhs, "/") {
		return r, fmt.Errorf("path %q: want * or an absolute endpoint path", lhs)
	}
	r.Path = lhs
	if body, limit, ok := strings.Cut(rhs, "@"); ok {
		n, err := strconv.Atoi(limit)
		if err != nil || n < 1 {
			return r, fmt.Errorf("limit %q: want a positive integer", limit)
		}
		r.Limit = n
		rhs = body
	}
	parts := strings.Split(rhs, ":")
	rate, err := strconv.ParseFloat(parts[0], 64)
	if err != nil || rate < 0 || rate > 1 {
		return r, fmt.Errorf("rate %q: want a number in 0..1", parts[0])
	}
	r.Rate = rate
	if len(parts) < 2 {
		return r, fmt.Errorf("missing kind")
	}
	r.Kind = FaultKind(parts[1])
	args := parts[2:]
	switch r.Kind {
	case FaultThrottle:
		r.RetryAfter = 1
		if len(args) == 1 {
			n, err := strconv.Atoi(args[0])
			if err != nil || n < 0 {
				return r, fmt.Errorf("retry-after %q: want seconds", args[0])
			}
			r.RetryAfter = n
			args = nil
		}
	case FaultJob:
		if len(args) != 1 {
			return r, fmt.Errorf("job fault needs a code: job:CODE")
		}
		n, err := strconv.Atoi(args[0])
		if err != nil || n <= 0 {
			return r, fmt.Errorf("job code %q: want a positive integer", args[0])
		}
		r.Code = n
		args = nil
	case FaultUnavailable, FaultLocked, FaultDrop, FaultDropAfterCommit:
	default:
		return r, fmt.Errorf("kind %q: want 429, 503, locked, eof, eof-after or job", r.Kind)
	}
	if len(args) > 0 {
		return r, fmt.Errorf("unexpected argument %q", strings.Join(args, ":"))
	}
	return r, nil
}

// String renders the rule in the --faults syntax.
func (r FaultRule) String() string {
	var b strings.Builder
	if r.Method != "" && r.Method != "*" {
		b.WriteString(r.Method + " ")
	}
	b.WriteString(r.Path)
	b.WriteString("=" + strconv.FormatFloat(r.Rate, 'g', -1, 64) + ":" + string(r.Kind))
	switch r.Kind {
	case FaultThrottle:
		b.WriteString(":" + strconv.Itoa(r.RetryAfter))
	case FaultJob:
		b.WriteString(":" + strconv.Itoa(r.Code))
	}
	if r.Limit > 0 {
		b.WriteString("@" + strconv.Itoa(r.Limit))
	}
	return b.String()
}

func (r *FaultRule) matches(method, tmpl string) bool {
	if r.Method != "" && r.Method != "*" && r.Method != method {
		return false
	}
	p := r.Path
	if p == "*" {
		return true
	}
	if !strings.HasPrefix(p, "/api/") && p != "/api" {
		p = "/api" + p
	}
	if prefix, ok := strings.CutSuffix(p, "*"); ok {
		return strings.HasPrefix(tmpl, prefix)
	}
	return strings.TrimSuffix(p, "/") == tmpl
}

// faultState is the live rule set with per-rule injection counts.
type faultState struct {
	rules []FaultRule
	fired []int
}

// SetFaults replaces the fault rules (and resets their limits).
func (s *Simulator) SetFaults(rules []FaultRule) {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	s.faults = faultState{rules: append([]FaultRule(nil), rules...), fired: make([]int, len(rules))}
}

// Faults returns the current fault rules.
func (s *Simulator) Faults() []FaultRule {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return append([]FaultRule(nil), s.faults.rules...)
}

// pickFault decides whether this request gets a fault.
func (s *Simulator) pickFault(method, tmpl string) *FaultRule {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	for i := range s.faults.rules {
		r := &s.faults.rules[i]
		if !r.matches(method, tmpl) {
			continue
		}
		if r.Limit > 0 && s.faults.fired[i] >= r.Limit {
			continue
		}
		if r.Rate < 1 && s.rng.Float64() >= r.Rate {
			continue
		}
		s.faults.fired[i]++
		rule := *r
		return &rule
	}
	return nil
}
