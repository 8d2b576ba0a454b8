package rest

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/ontap-csi/ontap-csi/backends"
)

func TestDecodeError(t *testing.T) {
	tests := []struct {
		name     string
		method   string
		status   int
		body     string
		class    Class
		code     string
		wantText string
	}{
		{"string code not found", "GET", 404, `{"error":{"message":"entry doesn't exist","code":"4","target":"uuid"}}`, ClassNotFound, "4", "entry doesn't exist"},
		{"numeric code", "POST", 409, `{"error":{"message":"Duplicate volume name","code":917526}}`, ClassAlreadyExists, "917526", "Duplicate volume name"},
		{"specific code beats status", "DELETE", 400, `{"error":{"message":"LUN is mapped","code":"1254197"}}`, ClassInUse, "1254197", "LUN is mapped"},
		{"range code", "POST", 400, `{"error":{"message":"Unexpected argument \"x\".","code":"262179","target":"x"}}`, ClassInvalid, "262179", "Unexpected argument"},
		{"specific code inside a range wins", "POST", 400, `{"error":{"message":"bad chap","code":"5374147"}}`, ClassInvalid, "5374147", "bad chap"},
		{"401 without body", "GET", 401, ``, ClassAuth, "", "Unauthorized"},
		{"401 body cannot override", "GET", 401, `{"error":{"message":"nope","code":"4"}}`, ClassAuth, "4", "nope"},
		{"403 rbac", "PATCH", 403, `{"error":{"message":"not authorized for that command","code":"6"}}`, ClassAuth, "6", "not authorized"},
		{"400 user not authorized code", "POST", 400, `{"error":{"message":"User is not authorized","code":"6691623"}}`, ClassAuth, "6691623", "not authorized"},
		{"429", "POST", 429, `{"error":{"message":"Too many requests","code":"262160"}}`, ClassThrottled, "262160", "Too many"},
		{"503 code 7", "GET", 503, `{"error":{"message":"busy","code":"7"}}`, ClassThrottled, "7", "busy"},
		{"transient in use (503, code 8) is retried", "DELETE", 503, `{"error":{"message":"Resource is temporarily locked. Wait a few minutes and try again.","code":"8"}}`, ClassThrottled, "8", "temporarily locked"},
		{"message text decides nothing", "PATCH", 409, `{"error":{"message":"The system is temporarily locked, retry","code":"8"}}`, ClassInUse, "8", "temporarily locked"},
		{"unknown code on PATCH 409 is in use whatever the text", "PATCH", 409, `{"error":{"message":"The system is temporarily locked, retry","code":"13001"}}`, ClassInUse, "13001", "temporarily locked"},
		{"code 8 without lock is in use", "DELETE", 409, `{"error":{"message":"entry is in use","code":"8"}}`, ClassInUse, "8", "in use"},
		{"409 unknown code on POST", "POST", 409, `{"error":{"message":"conflict","code":"99999999"}}`, ClassAlreadyExists, "99999999", "conflict"},
		{"409 unknown code on DELETE", "DELETE", 409, `{"error":{"message":"conflict","code":"99999999"}}`, ClassInUse, "99999999", "conflict"},
		{"html body", "GET", 502, `<html>Bad Gateway</html>`, ClassUnknown, "", "Bad Gateway"},
		{"null code", "GET", 404, `{"error":{"message":"gone","code":null}}`, ClassNotFound, "", "gone"},
		{"500 job failed", "POST", 500, `{"error":{"message":"Job failed","code":"460770"}}`, ClassUnknown, "460770", "Job failed"},
		{"no error object", "GET", 400, `{"records":[]}`, ClassInvalid, "", "Bad Request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := decodeError(tt.method, tt.method+" /x", tt.status, []byte(tt.body))
			if e.Class != tt.class || e.Code != tt.code || e.Status != tt.status {
				t.Fatalf("got class %v code %q status %d, want %v %q %d", e.Class, e.Code, e.Status, tt.class, tt.code, tt.status)
			}
			if !strings.Contains(e.Error(), tt.wantText) {
				t.Fatalf("error %q does not contain %q", e.Error(), tt.wantText)
			}
		})
	}
}

// Each class answers to its own predicate only, through wrapping, and an
// ONTAP error is never mistaken for a backend error kind of the same name.
func TestClassPredicates(t *testing.T) {
	predicates := map[Class]func(error) bool{ClassNotFound: IsNotFound, ClassAlreadyExists: IsAlreadyExists, ClassInUse: IsInUse}
	kinds := []error{backends.ErrNotFound, backends.ErrAlreadyExists, backends.ErrInUse, backends.ErrInvalid, backends.ErrUnavailable}
	for class := ClassUnknown; class <= ClassAuth; class++ {
		err := fmt.Errorf("wrapped: %w", &Error{Class: class, Message: "m"})
		if ClassOf(err) != class {
			t.Errorf("ClassOf = %v, want %v", ClassOf(err), class)
		}
		for c, is := range predicates {
			if is(err) != (c == class) {
				t.Errorf("class %v: predicate of %v says %v", class, c, is(err))
			}
		}
		for _, kind := range kinds {
			if errors.Is(err, kind) {
				t.Errorf("class %v matches backend kind %v", class, kind)
			}
		}
	}
	if ClassOf(errors.New("plain")) != ClassUnknown || IsNotFound(errors.New("plain")) {
		t.Error("a non-ONTAP error has a class")
	}
	e := &Error{Class: ClassNotFound, Endpoint: "GET /storage/volumes", Status: http.StatusNotFound, Code: "4", Message: "entry doesn't exist", Target: "uuid", JobUUID: "j1"}
	if got, want := e.Error(), `ontap: GET /storage/volumes: entry doesn't exist (code 4, target "uuid", job j1, HTTP 404)`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// The codes ONTAP documents for one class are classified as that class
// whatever the status.
func TestCodeClasses(t *testing.T) {
	for code, class := range codeClasses {
		if got := classify(http.MethodPost, http.StatusBadRequest, code); got != class {
			t.Errorf("code %s: %v, want %v", code, got, class)
		}
	}
	for _, r := range codeRanges {
		for _, n := range []int64{r.lo, (r.lo + r.hi) / 2, r.hi} {
			if got := classify(http.MethodGet, http.StatusInternalServerError, strconv.FormatInt(n, 10)); got != r.class {
				t.Errorf("code %d: %v, want %v", n, got, r.class)
			}
		}
	}
}

func TestDecodeJob(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		wantErr bool  // decoding fails
		class   Class // of the job failure; -1 for success or not terminal
		code    string
	}{
		{"success", `{"uuid":"j","state":"success","message":"success","code":0}`, false, -1, ""},
		{"running", `{"uuid":"j","state":"running","message":"creating_node_backups"}`, false, -1, ""},
		{"failure integer code", `{"uuid":"j","state":"failure","message":"Duplicate volume name","code":917526}`, false, ClassAlreadyExists, "917526"},
		{"failure error object wins", `{"uuid":"j","state":"failure","message":"x","code":460770,"error":{"code":"1638555","message":"snapshot busy"}}`, false, ClassInUse, "1638555"},
		{"failure string code", `{"uuid":"j","state":"failure","message":"entry doesn't exist","code":"4"}`, false, ClassNotFound, "4"},
		{"failure code zero", `{"uuid":"j","state":"failure","message":"broken","code":0}`, false, ClassUnknown, ""},
		{"unknown state", `{"uuid":"j","state":"exploded"}`, true, -1, ""},
		{"not json", `<html/>`, true, -1, ""},
		{"code is object", `{"uuid":"j","state":"failure","code":{}}`, true, -1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, err := decodeJob([]byte(tt.body))
			if (err != nil) != tt.wantErr {
				t.Fatalf("decodeJob error = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			ferr := j.failure("POST", "POST /storage/volumes")
			if tt.class == -1 {
				if ferr != nil {
					t.Fatalf("unexpected failure %v", ferr)
				}
				return
			}
			var e *Error
			if !errors.As(ferr, &e) || e.Class != tt.class || e.Code != tt.code || e.JobUUID != "j" {
				t.Fatalf("failure = %#v, want class %v code %q", ferr, tt.class, tt.code)
			}
		})
	}
}

func TestDecodeJobRef(t *testing.T) {
	if id, err := decodeJobRef([]byte(`{"job":{"uuid":"abc-1","_links":{"self":{"href":"/api/cluster/jobs/abc-1"}}}}`)); err != nil || id != "abc-1" {
		t.Fatalf("got %q, %v", id, err)
	}
	for _, bad := range []string{`{}`, `{"job":{}}`, `{"job":{"uuid":"../x"}}`, `nope`} {
		if _, err := decodeJobRef([]byte(bad)); err == nil {
			t.Errorf("decodeJobRef(%s) succeeded", bad)
		}
	}
}
