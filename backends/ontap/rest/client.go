// Package rest is a small typed client for the ONTAP REST API (ONTAP 9.8+,
// /api) covering exactly what the ontap-nas and ontap-san drivers need.
//
// Every call takes a context, which bounds it as a whole (retries and job
// waits included); each HTTP request is also bounded by
// ClientConfig.RequestTimeout. Failures are *Error values classified once,
// by ONTAP's code (see Class); test them with ClassOf or IsNotFound.
package rest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends/ontap/internal/lif"
)

// Defaults of ClientConfig.
const (
	defaultMaxConcurrentRequests = 20 // Trident's ONTAPRequestLimit
	defaultReturnTimeout         = 30 * time.Second
	defaultMaxAttempts           = 8
	defaultRetryBaseDelay        = 100 * time.Millisecond
	defaultRetryMaxDelay         = 5 * time.Second
	defaultMaxRetryAfter         = 30 * time.Second
	defaultJobPollInitial        = 50 * time.Millisecond
	defaultJobPollMax            = time.Second

	maxReturnTimeout = 120 * time.Second // ONTAP accepts 0..120 s
	maxResponseBytes = 64 << 20
	maxPages         = 10000
)

// ClientConfig configures a Client. Zero values take the defaults above.
// String, GoString and LogValue redact the secrets.
type ClientConfig struct {
	// ManagementLIF is the cluster or SVM management address: "host",
	// "host:port", "[v6addr]" or "[v6addr]:port" (a bare IPv6 address is
	// accepted too).
	ManagementLIF string
	// SVM is the name of the SVM every call works in.
	SVM string

	// Basic authentication, used unless a client certificate is given.
	Username string
	Password string
	// ClientCertificate and ClientPrivateKey are PEM; when set, the client
	// authenticates with mutual TLS and sends no Authorization header.
	ClientCertificate []byte
	ClientPrivateKey  []byte
	// TrustedCACertificate is PEM. When empty the system roots verify the
	// server, unless InsecureSkipTLSVerify is set.
	TrustedCACertificate  []byte
	InsecureSkipTLSVerify bool
	// Scheme is "https" (default) or "http". Plain HTTP exists only for
	// tests against the simulator; it would send credentials in the clear.
	Scheme string

	// MaxConcurrentRequests caps in-flight requests per management LIF. The
	// cap is shared by every Client of the process that talks to the same
	// LIF; the first Client created for a LIF sets its size.
	MaxConcurrentRequests int
	// RequestTimeout bounds one HTTP request; it must exceed ReturnTimeout
	// (default: ReturnTimeout + 30 s).
	RequestTimeout time.Duration
	// ReturnTimeout is sent as return_timeout on every mutating call, so a
	// job that finishes within it costs a single round trip (max 120 s).
	ReturnTimeout time.Duration
	// MaxAttempts bounds the attempts of one request on 429, 503 and
	// connection failures.
	MaxAttempts    int
	RetryBaseDelay time.Duration
	RetryMaxDelay  time.Duration
	// MaxRetryAfter caps how long a Retry-After header may make us wait.
	MaxRetryAfter time.Duration
	// JobPollInitial and JobPollMax shape the doubling backoff used to poll a
	// job that did not finish within ReturnTimeout.
	JobPollInitial time.Duration
	JobPollMax     time.Duration
}

func (c ClientConfig) String() string {
	return fmt.Sprintf("rest.ClientConfig{ManagementLIF:%q SVM:%q Username:%q Password:%s ClientCertificate:%s "+
		"ClientPrivateKey:%s TrustedCACertificate:%s InsecureSkipTLSVerify:%t Scheme:%q}",
		c.ManagementLIF, c.SVM, c.Username, redacted(c.Password != ""), present(len(c.ClientCertificate) > 0),
		redacted(len(c.ClientPrivateKey) > 0), present(len(c.TrustedCACertificate) > 0),
		c.InsecureSkipTLSVerify, c.Scheme)
}

func (c ClientConfig) GoString() string     { return c.String() }
func (c ClientConfig) LogValue() slog.Value { return slog.StringValue(c.String()) }

func redacted(set bool) string {
	if set {
		return "<redacted>"
	}
	return `""`
}

func present(set bool) string {
	if set {
		return "<set>"
	}
	return `""`
}

func (c *ClientConfig) setDefaults() {
	if c.Scheme == "" {
		c.Scheme = "https"
	}
	if c.MaxConcurrentRequests <= 0 {
		c.MaxConcurrentRequests = defaultMaxConcurrentRequests
	}
	if c.ReturnTimeout <= 0 {
		c.ReturnTimeout = defaultReturnTimeout
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = c.ReturnTimeout + 30*time.Second
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = defaultMaxAttempts
	}
	if c.RetryBaseDelay <= 0 {
		c.RetryBaseDelay = defaultRetryBaseDelay
	}
	if c.RetryMaxDelay <= 0 {
		c.RetryMaxDelay = defaultRetryMaxDelay
	}
	if c.MaxRetryAfter <= 0 {
		c.MaxRetryAfter = defaultMaxRetryAfter
	}
	if c.JobPollInitial <= 0 {
		c.JobPollInitial = defaultJobPollInitial
	}
	if c.JobPollMax <= 0 {
		c.JobPollMax = defaultJobPollMax
	}
}

// Client talks to one SVM through one management LIF. It is safe for
// concurrent use.
type Client struct {
	cfg     ClientConfig
	baseURL url.URL // scheme://host:port/api
	http    *http.Client
	sem     chan struct{}

	svmMu   sync.Mutex
	svmUUID string

	// sleep is time.Sleep bounded by a context; tests replace it to observe
	// the waits without timing anything.
	sleep func(context.Context, time.Duration) error
}

// NewClient validates cfg and builds a Client. It does not contact ONTAP.
func NewClient(cfg ClientConfig) (*Client, error) {
	cfg.setDefaults()
	hostPort, err := lif.HostPort(cfg.ManagementLIF)
	if err != nil {
		return nil, fmt.Errorf("ontap: %w", err)
	}
	if cfg.SVM == "" {
		return nil, errors.New("ontap: SVM name is required")
	}
	if cfg.Scheme != "https" && cfg.Scheme != "http" {
		return nil, fmt.Errorf("ontap: scheme %q is neither https nor http", cfg.Scheme)
	}
	if cfg.ReturnTimeout > maxReturnTimeout {
		return nil, fmt.Errorf("ontap: return timeout %s exceeds ONTAP's maximum of %s", cfg.ReturnTimeout, maxReturnTimeout)
	}
	if cfg.RequestTimeout <= cfg.ReturnTimeout {
		return nil, fmt.Errorf("ontap: request timeout %s must exceed the return timeout %s", cfg.RequestTimeout, cfg.ReturnTimeout)
	}
	hasCert := len(cfg.ClientCertificate) > 0 || len(cfg.ClientPrivateKey) > 0
	if !hasCert && (cfg.Username == "" || cfg.Password == "") {
		return nil, errors.New("ontap: either username and password or a client certificate and key are required")
	}

	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: cfg.InsecureSkipTLSVerify} //nolint:gosec // explicit opt-in
	if len(cfg.TrustedCACertificate) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cfg.TrustedCACertificate) {
			return nil, errors.New("ontap: trusted CA certificate holds no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	if hasCert {
		pair, err := tls.X509KeyPair(cfg.ClientCertificate, cfg.ClientPrivateKey)
		if err != nil {
			// The tls error text names no key material.
			return nil, fmt.Errorf("ontap: client certificate and key: %w", err)
		}
		tlsConfig.Certificates = []tls.Certificate{pair}
	}

	transport := &http.Transport{
		// No proxy: management LIFs sit on internal networks, and an
		// HTTP(S)_PROXY set for image pulls must not see ONTAP credentials.
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tlsConfig,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: cfg.MaxConcurrentRequests,
		// ONTAP closes idle keep-alive connections after 5 s; dropping ours
		// first avoids most reuse races that end in EOF.
		IdleConnTimeout:       4 * time.Second,
		ResponseHeaderTimeout: cfg.RequestTimeout,
		ForceAttemptHTTP2:     false,
	}
	c := &Client{
		cfg:     cfg,
		baseURL: url.URL{Scheme: cfg.Scheme, Host: hostPort, Path: "/api"},
		http:    &http.Client{Transport: transport, Timeout: cfg.RequestTimeout},
		sem:     lifSemaphore(cfg.Scheme+"://"+hostPort, cfg.MaxConcurrentRequests),
		sleep:   sleepCtx,
	}
	return c, nil
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

var lifSemaphores sync.Map // "scheme://host:port" -> chan struct{}

func lifSemaphore(key string, size int) chan struct{} {
	s, _ := lifSemaphores.LoadOrStore(key, make(chan struct{}, size))
	return s.(chan struct{})
}

// validPathSegment reports whether s (a UUID, numeric id or name that came
// from ONTAP) can be put into a URL path as one segment.
func validPathSegment(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/?#%\\") && len(s) <= 1024
}

// call is one logical ONTAP request.
type call struct {
	method   string
	endpoint string // path template for logs and metrics, e.g. "/storage/volumes/{uuid}"
	path     string // path below /api, segments already escaped
	query    url.Values
	body     any
}

func (r *call) label() string { return r.method + " " + r.endpoint }

// result is a successful response.
type result struct {
	status int
	body   []byte
	// ambiguous is set when an earlier attempt of this call may have reached
	// ONTAP and taken effect although we never saw its response (connection
	// dropped after the request was written, or timed out). Create and delete
	// methods use it to tell "our own earlier attempt did it" from a real
	// conflict.
	ambiguous bool
}

// do sends a call, retrying on 429 (honouring Retry-After), 503 and
// connection failures. Every method is retried, POST included: each POST
// this client sends creates an object under a key ONTAP keeps unique (a
// name, path, or rule value), so a resend after an ambiguous failure can at
// worst fail with AlreadyExists, and the create methods resolve that by
// looking the object up (see result.ambiguous).
func (c *Client) do(ctx context.Context, r *call) (*result, error) {
	var body []byte
	if r.body != nil {
		var err error
		if body, err = json.Marshal(r.body); err != nil {
			return nil, &Error{Class: ClassInvalid, Endpoint: r.label(), Message: "encoding request: " + err.Error()}
		}
	}
	ambiguous := false
	var lastErr error
	for attempt := 1; ; attempt++ {
		res, retryAfter, wrote, err := c.attempt(ctx, r, body, attempt)
		if err == nil {
			res.ambiguous = ambiguous
			return res, nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, c.ctxError(r.label(), ctxErr)
		}
		var reason string
		var apiErr *Error
		if errors.As(err, &apiErr) && apiErr.Err == nil {
			// ONTAP answered. Only "overloaded" and "temporarily locked"
			// answers are retried; they mean the request was not processed.
			switch {
			case apiErr.Status == http.StatusTooManyRequests:
				reason = "429"
			case apiErr.Status == http.StatusServiceUnavailable:
				reason = "503"
			case apiErr.Class == ClassThrottled:
				reason = "locked"
			default:
				return nil, c.finalError(r, apiErr, ambiguous)
			}
		} else if isTLSFailure(err) {
			// A certificate ONTAP or we reject will not get better.
			return nil, c.finalError(r, &Error{Class: ClassAuth, Endpoint: r.label(),
				Message: "TLS with ONTAP failed: " + err.Error(), Err: err}, ambiguous)
		} else {
			reason = "connection"
			if wrote {
				ambiguous = true
			}
		}
		lastErr = err
		if attempt >= c.cfg.MaxAttempts {
			break
		}
		retriesTotal.WithLabelValues(r.label(), reason).Inc()
		outgoingRetried.WithLabelValues(outgoingTarget, c.baseURL.Host, r.method).Inc()
		delay := backoff(c.cfg.RetryBaseDelay, c.cfg.RetryMaxDelay, attempt)
		if retryAfter > 0 {
			delay = min(retryAfter, c.cfg.MaxRetryAfter)
		}
		if err := c.sleep(ctx, delay); err != nil {
			return nil, c.ctxError(r.label(), err)
		}
	}
	var apiErr *Error
	if !errors.As(lastErr, &apiErr) {
		apiErr = &Error{Class: ClassThrottled, Endpoint: r.label(), Err: lastErr}
	}
	return nil, c.finalError(r, apiErr, ambiguous)
}

func (c *Client) finalError(r *call, e *Error, ambiguous bool) error {
	errorsTotal.WithLabelValues(r.label(), e.Class.String()).Inc()
	if ambiguous {
		return &ambiguousError{e}
	}
	return e
}

// ambiguousError marks an error of a call whose earlier attempt may have
// taken effect. It is unwrapped by the create/delete methods and never
// escapes the package.
type ambiguousError struct{ err *Error }

func (e *ambiguousError) Error() string { return e.err.Error() }
func (e *ambiguousError) Unwrap() error { return e.err }

// wasAmbiguous reports whether err came from a call that may have taken
// effect in an earlier attempt, and returns the plain *Error.
func wasAmbiguous(err error) (bool, error) {
	var a *ambiguousError
	if errors.As(err, &a) {
		return true, a.err
	}
	return false, err
}

func (c *Client) ctxError(endpoint string, err error) error {
	return &Error{Class: ClassUnknown, Endpoint: endpoint, Message: err.Error(), Err: err}
}

// isTLSFailure reports a certificate or handshake rejection, as opposed to
// a transient connection failure.
func isTLSFailure(err error) bool {
	var (
		verifyErr    *tls.CertificateVerificationError
		unknownCA    x509.UnknownAuthorityError
		hostnameErr  x509.HostnameError
		invalidErr   x509.CertificateInvalidError
		alertErr     tls.AlertError
		recordHdrErr tls.RecordHeaderError
	)
	return errors.As(err, &verifyErr) || errors.As(err, &unknownCA) || errors.As(err, &hostnameErr) ||
		errors.As(err, &invalidErr) || errors.As(err, &alertErr) || errors.As(err, &recordHdrErr)
}

// CertificateError returns the certificate verification failure behind err
// (the server's certificate is not trusted, or does not name the host), or
// nil when err is not one.
func CertificateError(err error) error {
	var verifyErr *tls.CertificateVerificationError
	if errors.As(err, &verifyErr) && verifyErr.Err != nil {
		return verifyErr.Err
	}
	var (
		unknownCA   x509.UnknownAuthorityError
		hostnameErr x509.HostnameError
		invalidErr  x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &unknownCA):
		return unknownCA
	case errors.As(err, &hostnameErr):
		return hostnameErr
	case errors.As(err, &invalidErr):
		return invalidErr
	}
	return nil
}

// backoff returns base·2^(attempt-1) with ±10 % jitter, at most limit.
func backoff(base, limit time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < limit; i++ {
		d *= 2
	}
	if n, err := rand.Int(rand.Reader, big.NewInt(int64(d)/5+1)); err == nil {
		d = d - d/10 + time.Duration(n.Int64())
	}
	return min(d, limit)
}

// attempt performs one HTTP request while holding a slot of the LIF's
// concurrency cap. On failure it returns an *Error for an ONTAP answer, or
// the transport error; wrote tells whether the request was fully sent. Its
// log line is made with ctx, so it carries the id of the CSI call that made
// the request (the server's logrus hook adds it); n counts the attempts.
func (c *Client) attempt(ctx context.Context, r *call, body []byte, n int) (*result, time.Duration, bool, error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, 0, false, ctx.Err()
	}
	defer func() { <-c.sem }()

	u := c.baseURL
	u.Path += r.path
	q := r.query
	if r.method != http.MethodGet {
		q = cloneValues(q)
		q.Set("return_timeout", strconv.Itoa(int(c.cfg.ReturnTimeout/time.Second)))
	}
	u.RawQuery = q.Encode()

	var reqBody io.Reader
	if body != nil {
		reqBody = bytes.NewReader(body)
	}
	// sent records whether the whole request went out; the transport reports
	// it from its own goroutine.
	var sentMu sync.Mutex
	sent := false
	trace := &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		sentMu.Lock()
		sent = sent || i.Err == nil
		sentMu.Unlock()
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), r.method, u.String(), reqBody)
	if err != nil {
		return nil, 0, false, &Error{Class: ClassInvalid, Endpoint: r.label(), Message: "building request: " + err.Error()}
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", "ontap-csi")
	if len(c.cfg.ClientCertificate) == 0 {
		req.SetBasicAuth(c.cfg.Username, c.cfg.Password)
	}

	resp, elapsed, err := c.send(ctx, req, r)
	log := logrus.WithContext(ctx).WithFields(logrus.Fields{"method": r.method, "endpoint": r.endpoint, "duration": elapsed, "attempt": n})
	if err != nil {
		sentMu.Lock()
		w := sent
		sentMu.Unlock()
		log.WithField("error", scrubURLError(err)).Debug("ONTAP request failed")
		return nil, 0, w, scrubURLError(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	log = log.WithField("status", resp.StatusCode)
	if err == nil && len(data) > maxResponseBytes {
		err = fmt.Errorf("response larger than %d bytes", maxResponseBytes)
	}
	if err != nil {
		log.WithField("error", err).Debug("ONTAP request failed reading the response")
		return nil, 0, true, err
	}
	log.Debug("ONTAP request")
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return &result{status: resp.StatusCode, body: data}, 0, true, nil
	}
	apiErr := decodeError(r.method, r.label(), resp.StatusCode, data)
	var retryAfter time.Duration
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return nil, retryAfter, true, apiErr
}

// send sends one request and records it in the metrics.
func (c *Client) send(ctx context.Context, req *http.Request, r *call) (*http.Response, time.Duration, error) {
	inFlight := outgoingInFlight.WithLabelValues(outgoingTarget, req.URL.Host, r.method)
	inFlight.Inc()
	start := time.Now()
	resp, err := c.http.Do(req)
	elapsed := time.Since(start)
	inFlight.Dec()
	requestDuration.WithLabelValues(r.label()).Observe(elapsed.Seconds())
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	observeTrident(ctx, c.cfg.SVM, r.label(), req.URL.Host, r.method, status, err, elapsed)
	return resp, elapsed, err
}

// scrubURLError drops the URL from a *url.Error: it may carry names, and the
// error text is for the operator, who knows which endpoint failed anyway.
func scrubURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// parseRetryAfter reads delay-seconds or an HTTP date; 0 if absent or bad.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil {
		if secs < 0 {
			return 0
		}
		return time.Duration(min(secs, 3600)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return min(d, time.Hour)
		}
	}
	return 0
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v)+1)
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// get decodes a GET response into out.
func (c *Client) get(ctx context.Context, endpoint, path string, query url.Values, out any) error {
	r := &call{method: http.MethodGet, endpoint: endpoint, path: path, query: query}
	res, err := c.do(ctx, r)
	if err != nil {
		_, err = wasAmbiguous(err) // GETs change nothing
		return err
	}
	return decodeInto(r.label(), res.body, out)
}

func decodeInto(label string, body []byte, out any) error {
	if out == nil || len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return &Error{Class: ClassUnknown, Endpoint: label, Message: "decoding response: " + err.Error()}
	}
	return nil
}

// collection is ONTAP's envelope of a collection GET (and of a create with
// return_records=true).
type collection[T any] struct {
	Records    []T `json:"records"`
	NumRecords int `json:"num_records"`
	Links      struct {
		Next *struct {
			Href string `json:"href"`
		} `json:"next"`
	} `json:"_links"`
}

// list pages through a collection GET, following _links.next until it is
// absent (ONTAP may send a final empty page).
func list[T any](ctx context.Context, c *Client, endpoint, path string, query url.Values) ([]T, error) {
	var all []T
	for page := 0; ; page++ {
		if page >= maxPages {
			return nil, &Error{Class: ClassUnknown, Endpoint: "GET " + endpoint, Message: "too many pages"}
		}
		var coll collection[T]
		if err := c.get(ctx, endpoint, path, query, &coll); err != nil {
			return nil, err
		}
		all = append(all, coll.Records...)
		if coll.Links.Next == nil || coll.Links.Next.Href == "" {
			return all, nil
		}
		nextPath, nextQuery, err := c.nextPage(coll.Links.Next.Href)
		if err != nil {
			return nil, &Error{Class: ClassUnknown, Endpoint: "GET " + endpoint, Message: err.Error()}
		}
		path, query = nextPath, nextQuery
	}
}

// nextPage turns a _links.next href into a path and query of our base. Only
// the path and query are taken: a next link can never send us (and our
// credentials) to another host.
func (c *Client) nextPage(href string) (string, url.Values, error) {
	u, err := url.Parse(href)
	if err != nil {
		return "", nil, fmt.Errorf("bad next link: %w", err)
	}
	p := u.EscapedPath()
	if !strings.HasPrefix(p, "/api/") {
		return "", nil, fmt.Errorf("next link %q is outside /api", href)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", nil, fmt.Errorf("bad next link query: %w", err)
	}
	return strings.TrimPrefix(p, "/api"), q, nil
}

// mutate sends a POST, PATCH or DELETE and, when ONTAP answers 202, waits for
// the job. 200, 201 and 202 are all success. If out is non-nil the response
// body (e.g. return_records) is decoded into it.
func (c *Client) mutate(ctx context.Context, method, endpoint, path string, query url.Values, body, out any) error {
	r := &call{method: method, endpoint: endpoint, path: path, query: query, body: body}
	res, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	if res.status != http.StatusAccepted {
		return decodeInto(r.label(), res.body, out)
	}
	uuid, err := decodeJobRef(res.body)
	if err != nil {
		return c.keepAmbiguity(res, &Error{Class: ClassUnknown, Endpoint: r.label(), Status: res.status, Message: err.Error()})
	}
	if err := c.waitJob(ctx, method, endpoint, uuid); err != nil {
		return c.keepAmbiguity(res, err)
	}
	// A 202 may carry records (return_records=true); they are optional.
	_ = decodeInto(r.label(), res.body, out)
	return nil
}

func (c *Client) keepAmbiguity(res *result, err error) error {
	if !res.ambiguous {
		return err
	}
	var e *Error
	if errors.As(err, &e) {
		return &ambiguousError{e}
	}
	return err
}

// svm returns the UUID of the configured SVM, looked up once.
func (c *Client) svm(ctx context.Context) (string, error) {
	c.svmMu.Lock()
	defer c.svmMu.Unlock()
	if c.svmUUID != "" {
		return c.svmUUID, nil
	}
	q := url.Values{"fields": {"uuid,name"}}
	if err := literalQuery(q, "name", c.cfg.SVM); err != nil {
		return "", err
	}
	recs, err := list[struct {
		UUID string `json:"uuid"`
		Name string `json:"name"`
	}](ctx, c, "/svm/svms", "/svm/svms", q)
	if err != nil {
		return "", err
	}
	if len(recs) != 1 || !validPathSegment(recs[0].UUID) {
		return "", &Error{Class: ClassNotFound, Endpoint: "GET /svm/svms",
			Message: fmt.Sprintf("SVM %q not found (%d matching records)", c.cfg.SVM, len(recs))}
	}
	c.svmUUID = recs[0].UUID
	return c.svmUUID, nil
}

// queryLiteral returns the filter that matches v and nothing else in
// ONTAP's query language (docs/design/ontap-rest.md §2.1). A value without
// operators (* | ! < > .. braces, quotes, or the word null) is its own
// filter. Any other is made literal with braces, or with double quotes when
// it holds braces itself, so that a name never becomes a wildcard, an
// alternative, a range or null. A value holding both braces and double
// quotes cannot be written literally: ClassInvalid.
func queryLiteral(v string) (string, error) {
	switch {
	case v != "null" && !strings.ContainsAny(v, "*|!<>{}\"") && !strings.Contains(v, ".."):
		return v, nil
	case !strings.ContainsAny(v, "{}"):
		return "{" + v + "}", nil
	case !strings.Contains(v, `"`):
		return `"` + v + `"`, nil
	}
	return "", &Error{Class: ClassInvalid, Message: fmt.Sprintf("%q holds both braces and double quotes: no ONTAP query matches it literally", v)}
}

// literalQuery sets field to the literal filter for v.
func literalQuery(q url.Values, field, v string) error {
	lit, err := queryLiteral(v)
	if err == nil {
		q.Set(field, lit)
	}
	return err
}

// Literal is name as a part of an ONTAP query pattern that matches only
// itself, for methods that take a pattern (e.g. "/vol/<name>/*"). A name
// holding query operators cannot be a part of a larger pattern, quoted or
// not, so it is refused (ClassInvalid).
func Literal(name string) (string, error) {
	if lit, err := queryLiteral(name); err != nil || lit != name {
		return "", &Error{Class: ClassInvalid, Message: fmt.Sprintf("%q holds ONTAP query operators: it cannot be part of a query pattern", name)}
	}
	return name, nil
}

// notFound builds the error of a "get by name" that matched no record.
func notFound(endpoint, what, name string) error {
	return &Error{Class: ClassNotFound, Endpoint: "GET " + endpoint, Message: fmt.Sprintf("%s %q not found", what, name)}
}
