package ontapsim

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
)

type handlerFunc func(c *call) (*reply, *apiError)

// route is one "METHOD /api/template" endpoint.
type route struct {
	method string
	tmpl   string
	segs   []string
	lat    latencyClass
	// async routes may answer with a job; their handlers pass injected job
	// faults to the job. Faults on other routes fail synchronously.
	async  bool
	res    *resource // for query validation of non-GET requests (may be nil)
	params []string  // endpoint-specific query parameters
	h      handlerFunc
}

// call is one request being handled; handlers run with Simulator.mu held.
type call struct {
	s      *Simulator
	m      *model
	r      *http.Request
	route  *route
	params map[string]string
	q      url.Values
	body   *bodyReader
	fault  *FaultRule // FaultJob to apply to this call's operation
	u      *usage     // space measurements, memoised for this request
}

// reply is a handler's answer. A reply with a job is completed by the
// router: it waits up to return_timeout and answers 200/201, 202 or the
// job's error.
type reply struct {
	status   int
	body     any
	location string
	job      *job
	records  []map[string]any // return_records echo of an async create
	next     string           // collection paging: also sent as a Link header
}

func (s *Simulator) add(method, tmpl string, lat latencyClass, h handlerFunc, opts ...func(*route)) {
	rt := &route{method: method, tmpl: tmpl, segs: strings.Split(strings.Trim(tmpl, "/"), "/"), lat: lat, h: h}
	for _, o := range opts {
		o(rt)
	}
	s.routes = append(s.routes, rt)
}

func async(rt *route) { rt.async = true }

func withParams(p ...string) func(*route) {
	return func(rt *route) { rt.params = append(rt.params, p...) }
}

func withResource(res *resource) func(*route) { return func(rt *route) { rt.res = res } }

// match finds the route for path. pathKnown reports whether some route has
// that path under another method (405 rather than an invalid URL).
func (s *Simulator) match(method string, segs []string) (rt *route, params map[string]string, pathKnown bool) {
	for _, cand := range s.routes {
		if len(cand.segs) != len(segs) {
			continue
		}
		p := map[string]string{}
		ok := true
		for i, seg := range cand.segs {
			if strings.HasPrefix(seg, "{") {
				if segs[i] == "" {
					ok = false
					break
				}
				p[strings.Trim(seg, "{}")] = segs[i]
			} else if seg != segs[i] {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		pathKnown = true
		if cand.method == method {
			return cand, p, true
		}
	}
	return nil, nil, pathKnown
}

// splitPath unescapes each segment (an IQN's ':' may arrive as %3A) and
// drops a trailing slash ("/api/storage/volumes/?name=x" is a Location ONTAP
// hands out).
func splitPath(escaped string) ([]string, bool) {
	raw := strings.Split(strings.Trim(escaped, "/"), "/")
	out := make([]string, 0, len(raw))
	for _, seg := range raw {
		u, err := url.PathUnescape(seg)
		if err != nil {
			return nil, false
		}
		out = append(out, u)
	}
	return out, true
}

const maxBody = 8 << 20

func (s *Simulator) serveHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Server", "libzapid-httpd")
	h.Set("Cache-Control", "no-cache,no-store,must-revalidate")
	h.Set("X-Content-Type-Options", "nosniff")
	escaped := r.URL.EscapedPath()
	if escaped == "/sim" || strings.HasPrefix(escaped, "/sim/") {
		s.serveSim(w, r)
		return
	}
	hal := wantsHAL(r)
	internal := isInternal(r) // fixtures: no auth, faults, latency or counting
	rt, params, ok := s.resolveRoute(w, r, escaped, hal, internal)
	if !ok {
		return
	}
	key := r.Method + " " + rt.tmpl
	var fault *FaultRule
	if !internal {
		fault = s.pickFault(r.Method, rt.tmpl)
		defer s.stats.request(key, fault != nil)()
	}
	logger := logrus.WithFields(logrus.Fields{"method": r.Method, "endpoint": rt.tmpl})
	if fault != nil {
		logger = logger.WithField("fault", fault.String())
		if answerFault(w, hal, fault, rt) {
			return
		}
	}
	c, ok := s.newCall(w, r, rt, params, hal)
	if !ok {
		return
	}
	if fault != nil && fault.Kind == FaultJob {
		c.fault = fault
	}

	lat := rt.lat
	if rt.async && lat != latRequest && s.cfg.lunCreateAsync() {
		lat = latRequest // 9.16.1+ LUN operations: the time is spent in the job
	}
	if d := s.draw(s.cfg.Latency.class(lat)); d > 0 && !internal {
		s.stats.delay(key, d)
		s.sleep(d)
	}

	rep, aerr := s.handle(c)
	if fault != nil && fault.Kind == FaultDropAfterCommit {
		logger.Debug("ONTAP simulator: dropping connection after commit")
		dropConnection(w)
		return
	}
	if aerr != nil {
		logger.WithFields(logrus.Fields{"status": aerr.Status, "code": aerr.Code}).Debug("ONTAP simulator request failed")
		writeError(w, hal, aerr)
		return
	}
	if rep.location != "" {
		h.Set("Location", rep.location)
	}
	if rep.next != "" {
		h.Set("Link", "<"+rep.next+`>; rel="next"`)
	}
	writeJSON(w, hal, rep.status, rep.body)
}

// resolveRoute authenticates a request below /api and finds its route;
// when it cannot, it answers and reports false.
func (s *Simulator) resolveRoute(w http.ResponseWriter, r *http.Request, escaped string, hal, internal bool) (*route, map[string]string, bool) {
	if escaped != "/api" && !strings.HasPrefix(escaped, "/api/") {
		writeError(w, hal, errNotFound(codeNotFound, "", "API not found: %s", escaped))
		return nil, nil, false
	}
	segs, ok := splitPath(escaped)
	if !ok {
		writeError(w, hal, errInvalid(codeInvalidURL, "", "Invalid URL."))
		return nil, nil, false
	}
	if !internal && !s.authenticate(r) {
		w.Header().Set("WWW-Authenticate", `Basic realm="ONTAP"`)
		writeError(w, hal, newError(http.StatusUnauthorized, codePermissionDenied, "", "Authentication failed."))
		return nil, nil, false
	}
	rt, params, pathKnown := s.match(r.Method, segs)
	if rt == nil {
		if pathKnown {
			writeError(w, hal, newError(http.StatusMethodNotAllowed, codeNotSupported, "", "The %s method is not supported for %s.", r.Method, escaped))
		} else {
			writeError(w, hal, errInvalid(codeInvalidURL, "", "Invalid URL: %s.", escaped))
		}
		return nil, nil, false
	}
	return rt, params, true
}

// newCall reads a request's query and body; when they are not acceptable
// it answers and reports false.
func (s *Simulator) newCall(w http.ResponseWriter, r *http.Request, rt *route, params map[string]string, hal bool) (*call, bool) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, hal, errInvalid(codeInvalidURL, "", "Invalid URL query: %v.", err))
		return nil, false
	}
	if aerr := checkMethodParams(r.Method, rt, q); aerr != nil {
		writeError(w, hal, aerr)
		return nil, false
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		writeError(w, hal, errInvalid(codeInvalidJSON, "", "Unable to read the request body."))
		return nil, false
	}
	if len(data) > maxBody {
		writeError(w, hal, errInvalid(codeInvalidJSON, "", "Request body too large."))
		return nil, false
	}
	c := &call{s: s, r: r, route: rt, params: params, q: q}
	switch r.Method {
	case http.MethodGet, http.MethodDelete:
		if len(strings.TrimSpace(string(data))) > 0 {
			writeError(w, hal, errInvalid(codeBodyNotAllowed, "", "A request body is not allowed on %s requests.", r.Method))
			return nil, false
		}
	default:
		m, aerr := decodeBody(data)
		if aerr != nil {
			writeError(w, hal, aerr)
			return nil, false
		}
		c.body = &bodyReader{m: m}
	}
	return c, true
}

// handle runs the call's handler under the model lock, saves the state of
// a change, and completes an asynchronous operation.
func (s *Simulator) handle(c *call) (*reply, *apiError) {
	s.mu.Lock()
	c.m = s.m
	rep, aerr := c.route.h(c)
	if aerr == nil && c.r.Method != http.MethodGet {
		_ = s.saveLocked() // logged inside; the operation itself succeeded
	}
	s.mu.Unlock()

	if aerr == nil && rep.job != nil {
		rep, aerr = s.finishAsync(c, rep)
	}
	return rep, aerr
}

// answerFault injects the faults that strike before any state change and
// reports whether the request is finished.
func answerFault(w http.ResponseWriter, hal bool, fault *FaultRule, rt *route) bool {
	switch fault.Kind {
	case FaultThrottle:
		w.Header().Set("Retry-After", strconv.Itoa(fault.RetryAfter))
		writeError(w, hal, newError(http.StatusTooManyRequests, codeTooManyRequests, "", "Too many requests are being processed. Retry the request after a short delay."))
	case FaultUnavailable:
		writeError(w, hal, newError(http.StatusServiceUnavailable, codeResourceLimit, "", "Resource limit exceeded: the service is temporarily unavailable."))
	case FaultLocked:
		// ONTAP's "in use" (code 8) comes as 409 or 503 (docs/design/ontap-rest.md
		// §2.4); a transient refusal is a 503 (§2.6), which is what tells a
		// client to retry: the message is for people.
		writeError(w, hal, newError(http.StatusServiceUnavailable, codeInUse, "", "Unable to perform the operation: the system is temporarily locked. Retry the operation later."))
	case FaultDrop:
		dropConnection(w)
	case FaultJob:
		if rt.async {
			return false // the handler hands it to the job
		}
		writeError(w, hal, injectedJobError(fault.Code))
	default:
		return false // FaultDropAfterCommit acts after the handler
	}
	return true
}

func (s *Simulator) authenticate(r *http.Request) bool {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		return r.TLS.VerifiedChains[0][0].Subject.CommonName == s.cfg.Username
	}
	u, p, ok := r.BasicAuth()
	if !ok {
		return false
	}
	uok := subtle.ConstantTimeCompare([]byte(u), []byte(s.cfg.Username)) == 1
	pok := subtle.ConstantTimeCompare([]byte(p), []byte(s.cfg.Password)) == 1
	return uok && pok
}

// checkMethodParams validates the query of POST/PATCH/DELETE; GET queries
// are validated by the list and instance helpers, which know the resource.
func checkMethodParams(method string, rt *route, q url.Values) *apiError {
	if err := checkCommonParams(q); err != nil {
		return err
	}
	if method == http.MethodGet {
		return nil
	}
	for k := range q {
		switch {
		case k == "return_timeout" || (k == "return_records" && method != http.MethodDelete):
		case contains(rt.params, k):
		case method == http.MethodPost && rt.res != nil && rt.res.schema.known(k):
			return errInvalid(codeNoFilterOnPOST, k, "POST does not support filtering; specify %q in the request body.", k)
		default:
			return errInvalid(codeUnexpectedArgument, k, "Unexpected argument %q.", k)
		}
	}
	return nil
}

// finishAsync waits for rep.job up to return_timeout seconds (docs/design/ontap-rest.md §2.5): a job
// that finished in time turns the 202 into 201 (POST) / 200, or into the
// job's error.
func (s *Simulator) finishAsync(c *call, rep *reply) (*reply, *apiError) {
	j := rep.job
	state, jerr := jobQueued, (*apiError)(nil)
	// With return_timeout 0 (the default) the answer is always 202, even if
	// the job happens to be done already: clients rely on it (docs/design/ontap-rest.md §2.5).
	if n, _ := strconv.Atoi(c.q.Get("return_timeout")); n > 0 {
		t := time.NewTimer(time.Duration(n) * time.Second)
		select {
		case <-j.done:
		case <-t.C:
		case <-c.r.Context().Done():
		}
		t.Stop()
		s.mu.Lock()
		state, jerr = j.State, j.Err
		s.mu.Unlock()
	}
	body := map[string]any{"job": map[string]any{"uuid": j.UUID, "_links": selfLink("/api/cluster/jobs/" + j.UUID)}}
	if c.q.Get("return_records") == "true" && rep.records != nil {
		body["num_records"] = len(rep.records)
		body["records"] = rep.records
	}
	out := &reply{status: http.StatusAccepted, body: body, location: rep.location}
	switch state {
	case jobSuccess:
		out.status = http.StatusOK
		if c.r.Method == http.MethodPost {
			out.status = http.StatusCreated
		}
	case jobFailure:
		return nil, jerr
	}
	return out, nil
}

func wantsHAL(r *http.Request) bool {
	acc := r.Header.Get("Accept")
	return acc == "" || strings.Contains(acc, "hal+json") || strings.Contains(acc, "*/*")
}

func selfLink(href string) map[string]any {
	return map[string]any{"self": map[string]any{"href": href}}
}

func writeJSON(w http.ResponseWriter, hal bool, status int, body any) {
	if body == nil {
		body = map[string]any{}
	}
	ct := "application/hal+json"
	if !hal {
		ct = "application/json"
		body = stripLinks(body, true)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // hrefs keep their '&' as on ONTAP
	if err := enc.Encode(body); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":{"message":"internal error encoding the response","code":"262145"}}`)
	}
	data := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(status)
	w.Write(data)
}

// stripLinks removes HAL links for plain application/json clients, except
// the top-level "next" that paging needs (docs/design/ontap-rest.md §2.2).
func stripLinks(v any, top bool) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, c := range t {
			if k == "_links" {
				if l, ok := c.(map[string]any); ok && top && l["next"] != nil {
					out[k] = map[string]any{"next": l["next"]}
				}
				continue
			}
			out[k] = stripLinks(c, false)
		}
		return out
	case []map[string]any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = stripLinks(e, false)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = stripLinks(e, false)
		}
		return out
	}
	return v
}

func writeError(w http.ResponseWriter, hal bool, e *apiError) {
	obj := map[string]any{"message": e.Message, "code": e.Code}
	if e.Target != "" {
		obj["target"] = e.Target
	}
	writeJSON(w, hal, e.Status, map[string]any{"error": obj})
}

// dropConnection closes the client connection without an HTTP response.
func dropConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		// httptest.ResponseRecorder and HTTP/2 cannot hijack; abort the
		// handler so the server resets the stream instead.
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}

// ---- helpers used by handlers ----

func (c *call) returnRecords() bool { return c.q.Get("return_records") == "true" }

// list answers a collection GET.
func (c *call) list(res *resource, recs []map[string]any) (*reply, *apiError) {
	lq, err := parseListQuery(res, c.q, c.route.params...)
	if err != nil {
		return nil, err
	}
	return c.answerList(res, lq, recs)
}

// listByKeys answers a collection GET of n records that are costly to
// render (a volume's space sums its aggregate's). keys(i) holds some
// top-level fields of record i exactly as render(i) would, and may reuse
// its map from call to call; the filters on those fields run on it first,
// and only the records that pass are rendered. ONTAP answers a lookup by
// name or UUID from an index, so its time does not grow with the
// collection; without this, one lookup among 1,000 volumes rendered all
// 1,000 under the model's lock.
func (c *call) listByKeys(res *resource, n int, keys, render func(i int) map[string]any) (*reply, *apiError) {
	lq, err := parseListQuery(res, c.q, c.route.params...)
	if err != nil {
		return nil, err
	}
	var recs []map[string]any
	for i := range n {
		if lq.mayMatch(keys(i)) {
			recs = append(recs, render(i))
		}
	}
	return c.answerList(res, lq, recs)
}

// answerList filters, orders, pages and projects recs as lq asks.
func (c *call) answerList(res *resource, lq *listQuery, recs []map[string]any) (*reply, *apiError) {
	page, next, n := lq.run(res, recs)
	if page == nil {
		page = []map[string]any{}
	}
	links := selfLink(c.r.URL.RequestURI())
	body := map[string]any{"num_records": n, "_links": links}
	if !lq.noRecord {
		body["records"] = page
	}
	if next != nil {
		q := url.Values{}
		for k, v := range c.q {
			if k != "offset" && !strings.HasPrefix(k, "start.") {
				q[k] = v
			}
		}
		for k, v := range next {
			q[k] = v
		}
		href := c.r.URL.Path + "?" + q.Encode()
		links["next"] = map[string]any{"href": href}
		return &reply{status: http.StatusOK, body: body, next: href}, nil
	}
	return &reply{status: http.StatusOK, body: body}, nil
}

// instance answers an instance GET.
func (c *call) instance(res *resource, rec map[string]any) (*reply, *apiError) {
	for k := range c.q {
		switch k {
		case "fields", "ignore_unknown_fields", "return_timeout", "return_records":
		default:
			if !contains(c.route.params, k) {
				return nil, errInvalid(codeUnexpectedArgument, k, "Unexpected argument %q.", k)
			}
		}
	}
	sel, err := buildSelector(res, c.q.Get("fields"), true, c.q.Get("ignore_unknown_fields") == "true", nil)
	if err != nil {
		return nil, err
	}
	return &reply{status: http.StatusOK, body: project(rec, sel, false)}, nil
}

// created answers a synchronous create: 201 with {} or, with
// return_records=true, the new record.
func (c *call) created(rec map[string]any, location string) *reply {
	rep := &reply{status: http.StatusCreated, location: location}
	if c.returnRecords() {
		rep.body = map[string]any{"num_records": 1, "records": []map[string]any{rec}}
	}
	return rep
}

func okReply() *reply { return &reply{status: http.StatusOK} }

// checkBody validates the body's keys against what the operation accepts.
func (c *call) checkBody(settable schema, res *resource) *apiError {
	var readable schema
	if res != nil {
		readable = res.schema
	}
	return checkBodyKeys(c.body.m, settable, readable)
}

// patchBody requires a non-empty PATCH body (262190).
func (c *call) patchBody(settable schema, res *resource) *apiError {
	if len(c.body.m) == 0 {
		return errInvalid(codeNoPatchValues, "", "Must provide one or more values to modify.")
	}
	return c.checkBody(settable, res)
}

// resolveSVM picks the SVM from svm.uuid / svm.name in the body (or the
// X-Dot-SVM-* tunneling headers). required=false lets it default to the
// data SVM.
func (c *call) resolveSVM(b *bodyReader, required bool) (*svmState, *apiError) {
	uuid, hasUUID := b.str("svm.uuid")
	name, hasName := b.str("svm.name")
	if b.err != nil {
		return nil, b.err
	}
	if hu := c.r.Header.Get("X-Dot-SVM-UUID"); hu != "" {
		if hasUUID && uuid != hu {
			return nil, errInvalid(codeSVMMismatch, "svm.uuid", "The SVM UUID in the header does not match the one in the request.")
		}
		uuid, hasUUID = hu, true
	}
	if hn := c.r.Header.Get("X-Dot-SVM-Name"); hn != "" {
		if hasName && name != hn {
			return nil, errInvalid(codeSVMMismatch, "svm.name", "The SVM name in the header does not match the one in the request.")
		}
		name, hasName = hn, true
	}
	switch {
	case hasUUID:
		svm := c.m.svm(uuid)
		if svm == nil {
			return nil, errNotFound(codeSVMNotFound, "svm.uuid", "SVM \"%s\" does not exist.", uuid)
		}
		if hasName && svm.Name != name {
			return nil, errInvalid(codeSVMMismatch, "svm.name", "The specified \"svm.uuid\" and \"svm.name\" refer to different SVMs.")
		}
		return svm, nil
	case hasName:
		svm := c.m.svmByName(name)
		if svm == nil {
			return nil, errNotFound(codeSVMNotFound, "svm.name", "SVM \"%s\" does not exist.", name)
		}
		return svm, nil
	case required:
		return nil, errInvalid(codeSVMMissing, "svm", "Either \"svm.uuid\" or \"svm.name\" must be provided.")
	}
	return c.m.dataSVM(), nil
}

// queryBool reads a boolean query parameter.
func (c *call) queryBool(name string) bool { return strings.EqualFold(c.q.Get(name), "true") }

// failIfFaulted applies an injected job fault to an async route that
// completes synchronously (LUN operations before 9.16.1).
func (c *call) failIfFaulted() *apiError {
	if c.fault != nil {
		return injectedJobError(c.fault.Code)
	}
	return nil
}
