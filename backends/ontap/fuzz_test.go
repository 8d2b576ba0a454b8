package ontap

import (
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends/ontap/internal/lif"
)

// Seed corpora live in testdata/fuzz/<FuzzName>/.

func FuzzParseBackendConfig(f *testing.F) {
	// Warnings go to logrus; a fuzz worker's output is not drained while it
	// runs, so a full pipe would stall it.
	logrus.SetOutput(io.Discard)
	dir := f.TempDir() // holds no credentials file: relative ones fail to open
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseBackendConfig("fuzz.json", data, dir)
		if err != nil {
			if !strings.HasPrefix(err.Error(), `backend config "fuzz.json": `) {
				t.Fatalf("error without source: %v", err)
			}
			return
		}
		if cfg.Version != 1 || (cfg.StorageDriverName != DriverONTAPNAS && cfg.StorageDriverName != DriverONTAPSAN) {
			t.Fatalf("accepted %v", cfg)
		}
		if cfg.SVM == "" || cfg.ManagementLIF == "" || cfg.Defaults.Size <= 0 {
			t.Fatalf("accepted without required values: %v", cfg)
		}
		for _, p := range cfg.Storage {
			if p.Defaults.Size <= 0 {
				t.Fatalf("pool without size: %v", p)
			}
		}
		if _, err := lif.HostPort(cfg.ManagementLIF); err != nil {
			t.Fatalf("accepted management LIF %q: %v", cfg.ManagementLIF, err)
		}
		if _, err := unixPermissionsWire(cfg.Defaults.UnixPermissions); err != nil {
			t.Fatalf("accepted permissions %q", cfg.Defaults.UnixPermissions)
		}
		// A long enough password never shows in the printed config.
		if pw := string(cfg.Password); len(pw) >= 16 && strings.Contains(cfg.String(), pw) {
			t.Fatalf("password shown")
		}
	})
}

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
