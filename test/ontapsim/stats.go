package ontapsim

import (
	"sort"
	"sync"
	"time"
)

// EndpointStats counts the requests of one "METHOD /api/template" endpoint.
type EndpointStats struct {
	Requests int64         // every authenticated request routed to the endpoint, faulted ones included
	Faults   int64         // requests that got an injected fault
	Injected time.Duration // request-class delay slept for these requests
	// MaxInFlight is the most of these requests the simulator served at
	// once: whether a client's calls reach ONTAP side by side or in a row.
	MaxInFlight int64
}

// Stats are the simulator's counters since start or the last ResetStats.
type Stats struct {
	Endpoints map[string]EndpointStats
	Requests  int64
	Faults    int64
	Jobs      int64
	// JobTime is the sum of the durations of the jobs started.
	JobTime time.Duration
	// Injected is all latency the simulator imposed: request-class delays
	// plus job durations. A client that never polls needlessly takes about
	// this long (the ratio of wall time to Injected measures its overhead).
	Injected time.Duration
}

// Count returns the number of requests counted for method and endpoint
// template, e.g. st.Count("POST", "/api/storage/volumes").
func (st Stats) Count(method, tmpl string) int64 {
	return st.Endpoints[method+" "+tmpl].Requests
}

// Keys lists the endpoints seen, sorted.
func (st Stats) Keys() []string {
	keys := make([]string, 0, len(st.Endpoints))
	for k := range st.Endpoints {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

type statsCounter struct {
	mu       sync.Mutex
	st       Stats
	inFlight map[string]int64
}

// request counts a request of key, and counts it in flight until the
// returned func runs.
func (c *statsCounter) request(key string, fault bool) (leave func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.st.Endpoints == nil {
		c.st.Endpoints = map[string]EndpointStats{}
	}
	if c.inFlight == nil {
		c.inFlight = map[string]int64{}
	}
	e := c.st.Endpoints[key]
	e.Requests++
	c.st.Requests++
	if fault {
		e.Faults++
		c.st.Faults++
	}
	c.inFlight[key]++
	e.MaxInFlight = max(e.MaxInFlight, c.inFlight[key])
	c.st.Endpoints[key] = e
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.inFlight[key]--
	}
}

func (c *statsCounter) delay(key string, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.st.Endpoints[key]
	e.Injected += d
	c.st.Endpoints[key] = e
	c.st.Injected += d
}

func (c *statsCounter) job(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.Jobs++
	c.st.JobTime += d
	c.st.Injected += d
}

func (c *statsCounter) snapshot() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.st
	out.Endpoints = make(map[string]EndpointStats, len(c.st.Endpoints))
	for k, v := range c.st.Endpoints {
		out.Endpoints[k] = v
	}
	return out
}

func (c *statsCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st = Stats{}
}
