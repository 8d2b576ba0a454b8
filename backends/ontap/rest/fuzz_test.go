package rest

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// Seed corpora live in testdata/fuzz/<FuzzName>/.

func FuzzDecodeError(f *testing.F) {
	f.Fuzz(func(t *testing.T, method string, status int, body []byte) {
		if status < 100 || status > 599 {
			return
		}
		e := decodeError(method, method+" /x", status, body)
		if e.Status != status || e.Message == "" {
			t.Fatalf("decodeError lost status or message: %#v", e)
		}
		if len(e.Message) > maxMessageLen+3 || !utf8.ValidString(e.Message) && utf8.Valid(body) {
			t.Fatalf("message not bounded or broken: %q", e.Message)
		}
		switch status {
		case 401, 403:
			if e.Class != ClassAuth {
				t.Fatalf("status %d classified %v", status, e.Class)
			}
		case 429, 503:
			if e.Class != ClassThrottled {
				t.Fatalf("status %d classified %v", status, e.Class)
			}
		}
		if e.Class < ClassUnknown || e.Class > ClassAuth {
			t.Fatalf("class out of range: %d", e.Class)
		}
		_ = e.Error()
	})
}

func FuzzDecodeJob(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		if id, err := decodeJobRef(body); err == nil && !validPathSegment(id) {
			t.Fatalf("job ref %q accepted", id)
		}
		j, err := decodeJob(body)
		if err != nil {
			return
		}
		ferr := j.failure("POST", "POST /storage/volumes")
		if (j.State == jobFailure) != (ferr != nil) {
			t.Fatalf("state %q gave failure %v", j.State, ferr)
		}
		var e *Error
		if ferr != nil && (!errors.As(ferr, &e) || e.Message == "" || len(e.Message) > maxMessageLen+3) {
			t.Fatalf("bad failure %#v", ferr)
		}
	})
}

// FuzzQueryLiteral: the filter the client writes for a name matches that
// name and nothing else, as the simulator reads ONTAP's query language
// (docs/design/ontap-rest.md §2.1): a name with operators in it (a snapshot
// takes its CSI name) must not become a wildcard, an alternative, a range
// or null.
func FuzzQueryLiteral(f *testing.F) {
	for _, s := range []string{"trident_pvc_1", "", "null", "!null", "a*", "a|b", "}|{", "a..b", "<5", `"q"`, "{x}", `a"}|{"b`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		lit, err := queryLiteral(v)
		if err != nil {
			if !strings.Contains(v, `"`) || !strings.ContainsAny(v, "{}") {
				t.Fatalf("queryLiteral(%q) refused: %v", v, err)
			}
			return
		}
		if !ontapsim.MatchQuery(lit, v) {
			t.Fatalf("filter %q does not match %q", lit, v)
		}
		for _, other := range []string{v + "x", "x" + v, "", strings.ToUpper(v), "*"} {
			if other != v && ontapsim.MatchQuery(lit, other) {
				t.Fatalf("filter %q for %q also matches %q", lit, v, other)
			}
		}
	})
}
