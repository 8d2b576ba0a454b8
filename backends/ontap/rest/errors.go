package rest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Class is the coarse kind of an ONTAP failure. It is decided once, here, from
// the HTTP status and ONTAP's error code (docs/design/ontap-rest.md §6; codes.go), so that
// callers branch on a class and never on codes or message text.
type Class int

const (
	ClassUnknown Class = iota
	ClassNotFound
	ClassAlreadyExists
	ClassInUse // busy, mapped, has clones, in use by a volume
	ClassInvalid
	ClassThrottled // overloaded, rate limited or unreachable: retry later
	ClassAuth
)

var classNames = [...]string{"unknown", "not_found", "already_exists", "in_use", "invalid", "throttled", "auth"}

// String returns a stable snake_case name, also used as a metrics label value.
func (c Class) String() string {
	if c < 0 || int(c) >= len(classNames) {
		return "unknown"
	}
	return classNames[c]
}

// Error is a failed ONTAP call. Message and Code are ONTAP's own, kept so that
// the CSI error text can quote them. It never contains credentials or request
// bodies.
type Error struct {
	Class    Class
	Endpoint string // method and path template, e.g. "POST /storage/volumes"
	Status   int    // HTTP status; 0 when the call never got a response
	Code     string // ONTAP error code ("917526"); "" when ONTAP gave none
	Message  string // ONTAP error message, or a description of the failure
	Target   string // ONTAP error target (the offending field), if any
	JobUUID  string // set when the failure was reported by an asynchronous job
	Err      error  // underlying transport or context error, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("ontap: ")
	if e.Endpoint != "" {
		b.WriteString(e.Endpoint)
		b.WriteString(": ")
	}
	msg := e.Message
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	if msg == "" {
		msg = e.Class.String()
	}
	b.WriteString(msg)
	var details []string
	if e.Code != "" {
		details = append(details, "code "+e.Code)
	}
	if e.Target != "" {
		details = append(details, "target "+strconv.Quote(e.Target))
	}
	if e.JobUUID != "" {
		details = append(details, "job "+e.JobUUID)
	}
	if e.Status != 0 {
		details = append(details, "HTTP "+strconv.Itoa(e.Status))
	}
	if len(details) > 0 {
		b.WriteString(" (")
		b.WriteString(strings.Join(details, ", "))
		b.WriteString(")")
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// ClassOf returns the class of err, or ClassUnknown if err is not from ONTAP.
func ClassOf(err error) Class {
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return ClassUnknown
}

// IsNotFound reports an ONTAP "no such object" (a collection GET that
// matched nothing counts too).
func IsNotFound(err error) bool { return ClassOf(err) == ClassNotFound }

// IsAlreadyExists reports that ONTAP refused a create because the name or
// key is taken.
func IsAlreadyExists(err error) bool { return ClassOf(err) == ClassAlreadyExists }

// IsInUse reports that ONTAP refused because another object depends on the
// object (clones, maps, a volume using a policy) or it is busy.
func IsInUse(err error) bool { return ClassOf(err) == ClassInUse }

// hasCode reports whether err is an ONTAP error with one of the given codes.
// The client uses it for the few codes whose meaning is narrower than their
// class (e.g. "LUN already has this size").
func hasCode(err error, codes ...string) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	for _, c := range codes {
		if e.Code == c {
			return true
		}
	}
	return false
}

// classify decides the class of a failure from the HTTP status and ONTAP's
// code, never from the message text. method is the HTTP method of the call
// (a 409 without a known code means "exists" for a POST and "in use"
// otherwise); status is 0 for a failure reported by a job.
func classify(method string, status int, code string) Class {
	// The status is authoritative where it says how to react: the bodies of
	// 401s are unreliable, and 429/503 mean "try again" whatever the code
	// (ONTAP's code 8, "in use", comes as a 503 while the condition is
	// transient, e.g. a configuration lock: docs/design/ontap-rest.md §2.4, §2.6).
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return ClassAuth
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return ClassThrottled
	}
	if c, ok := codeClasses[code]; ok {
		return c
	}
	if n, err := strconv.ParseInt(code, 10, 64); err == nil {
		for _, r := range codeRanges {
			if n >= r.lo && n <= r.hi {
				return r.class
			}
		}
	}
	switch status {
	case http.StatusNotFound:
		return ClassNotFound
	case http.StatusConflict:
		if method == http.MethodPost {
			return ClassAlreadyExists
		}
		return ClassInUse
	case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusMethodNotAllowed:
		return ClassInvalid
	}
	return ClassUnknown
}

// apiCode is an ONTAP error code. ONTAP sends it as a JSON string in error
// objects and as a number in jobs; both are accepted.
type apiCode string

func (c *apiCode) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	switch {
	case s == "null":
		*c = ""
	case strings.HasPrefix(s, `"`):
		var str string
		if err := json.Unmarshal(b, &str); err != nil {
			return err
		}
		*c = apiCode(strings.TrimSpace(str))
	default:
		var n json.Number
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("error code %s is neither a string nor a number", s)
		}
		*c = apiCode(n.String())
	}
	return nil
}

type apiError struct {
	Message string  `json:"message"`
	Code    apiCode `json:"code"`
	Target  string  `json:"target"`
}

// maxMessageLen bounds the ONTAP message kept in an error: it ends up in CSI
// error strings and logs, and a misbehaving server must not blow those up.
const maxMessageLen = 1024

func truncateMessage(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxMessageLen {
		return s
	}
	// Cut on a rune boundary.
	cut := maxMessageLen
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + "..."
}

// decodeError builds the error for a non-2xx response. The body may be an
// ONTAP error object, empty (typical for 401) or anything else; the status
// alone then decides the class.
func decodeError(method, endpoint string, status int, body []byte) *Error {
	e := &Error{Endpoint: endpoint, Status: status}
	var env struct {
		Error *apiError `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil && env.Error != nil {
		e.Code = string(env.Error.Code)
		e.Message = truncateMessage(env.Error.Message)
		e.Target = truncateMessage(env.Error.Target)
	}
	if e.Message == "" {
		e.Message = http.StatusText(status)
		if e.Message == "" {
			e.Message = "HTTP status " + strconv.Itoa(status)
		}
	}
	e.Class = classify(method, status, e.Code)
	return e
}
