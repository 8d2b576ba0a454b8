package ontap

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Class is the coarse kind of an ONTAP failure. It is decided once, here, from
// the HTTP status and ONTAP's error code (docs/design/ontap-rest.md §6), so that callers
// branch on a class and never on codes or message text.
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

// Sentinels for errors.Is. Every error the client returns for a failed ONTAP
// call is an *Error, which matches the sentinel of its class.
var (
	ErrNotFound      = errors.New("ontap: not found")
	ErrAlreadyExists = errors.New("ontap: already exists")
	ErrInUse         = errors.New("ontap: in use")
	ErrInvalid       = errors.New("ontap: invalid request")
	ErrThrottled     = errors.New("ontap: throttled or unavailable")
	ErrAuth          = errors.New("ontap: authentication or authorization failed")
)

var classSentinels = map[Class]error{
	ClassNotFound:      ErrNotFound,
	ClassAlreadyExists: ErrAlreadyExists,
	ClassInUse:         ErrInUse,
	ClassInvalid:       ErrInvalid,
	ClassThrottled:     ErrThrottled,
	ClassAuth:          ErrAuth,
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

// Is makes errors.Is(err, ErrNotFound) (etc.) work.
func (e *Error) Is(target error) bool {
	s, ok := classSentinels[e.Class]
	return ok && s == target
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

func IsNotFound(err error) bool      { return errors.Is(err, ErrNotFound) }
func IsAlreadyExists(err error) bool { return errors.Is(err, ErrAlreadyExists) }
func IsInUse(err error) bool         { return errors.Is(err, ErrInUse) }
func IsInvalid(err error) bool       { return errors.Is(err, ErrInvalid) }
func IsThrottled(err error) bool     { return errors.Is(err, ErrThrottled) }
func IsAuth(err error) bool          { return errors.Is(err, ErrAuth) }

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

// codeClasses lists the specific ONTAP codes of docs/design/ontap-rest.md §6 (plus 5374034,
// "initiator is not a member", which is a not-found). Specific codes win over
// the ranges below and over the HTTP status.
var codeClasses = map[string]Class{
	// Not found.
	"4": ClassNotFound, "917927": ClassNotFound, "918235": ClassNotFound, "524601": ClassNotFound,
	"5374875": ClassNotFound, "5374876": ClassNotFound, "5374852": ClassNotFound, "5374878": ClassNotFound,
	"5374922": ClassNotFound, "1254201": ClassNotFound, "1638600": ClassNotFound, "1703954": ClassNotFound,
	"2621462": ClassNotFound, "5374895": ClassNotFound, "8586226": ClassNotFound, "5374034": ClassNotFound,
	// Already exists.
	"1": ClassAlreadyExists, "917526": ClassAlreadyExists, "13107405": ClassAlreadyExists,
	"5374023": ClassAlreadyExists, "5374242": ClassAlreadyExists, "5440688": ClassAlreadyExists,
	"5702832": ClassAlreadyExists, "525059": ClassAlreadyExists, "1704070": ClassAlreadyExists,
	"1254207": ClassAlreadyExists, "5374035": ClassAlreadyExists, "5374930": ClassAlreadyExists,
	"5374142": ClassAlreadyExists, "1254196": ClassAlreadyExists,
	// In use / busy.
	"8": ClassInUse, "1254197": ClassInUse, "1254213": ClassInUse, "1703945": ClassInUse, "1703947": ClassInUse,
	"1703953": ClassInUse, "524615": ClassInUse, "1638555": ClassInUse, "1638543": ClassInUse,
	"524486": ClassInUse, "7018877": ClassInUse,
	// Invalid.
	"2": ClassInvalid, "917534": ClassInvalid, "918252": ClassInvalid, "5374892": ClassInvalid,
	"1254226": ClassInvalid, "1703952": ClassInvalid, "5373958": ClassInvalid, "5374038": ClassInvalid,
	"5374039": ClassInvalid,
	// Throttled.
	"7": ClassThrottled, "262160": ClassThrottled,
	// Auth.
	"6": ClassAuth, "6691623": ClassAuth,
}

var codeRanges = []struct {
	lo, hi int64
	class  Class
}{
	{262177, 262286, ClassInvalid},   // common argument/field errors
	{917886, 917888, ClassInvalid},   // volume name rules
	{1704036, 1704065, ClassInvalid}, // export rule clientmatch format
	{5373969, 5373993, ClassInvalid}, // initiator name format
	{5374121, 5374130, ClassInvalid}, // LUN name and size
	{5374145, 5374150, ClassInvalid}, // CHAP settings
}

// classify decides the class of a failure. method is the HTTP method of the
// call (a 409 without a known code means "exists" for a POST and "in use"
// otherwise); status is 0 for a failure reported by a job.
func classify(method string, status int, code, message string) Class {
	// The status is authoritative where it says how to react: the bodies of
	// 401s are unreliable, and 429/503 mean "try again" whatever the code.
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return ClassAuth
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return ClassThrottled
	}
	// ONTAP reports a transient lock with the generic code 8 ("in use"), so
	// the message must win over the code: it means "retry", not "in use".
	if strings.Contains(strings.ToLower(message), "temporarily locked") {
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
	e.Class = classify(method, status, e.Code, e.Message)
	return e
}
