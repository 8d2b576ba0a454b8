package config

import (
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends/ontap/internal/lif"
)

// Seed corpora live in testdata/fuzz/<FuzzName>/.

func FuzzParse(f *testing.F) {
	// Warnings go to logrus; a fuzz worker's output is not drained while it
	// runs, so a full pipe would stall it.
	logrus.SetOutput(io.Discard)
	dir := f.TempDir() // holds no credentials file: relative ones fail to open
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz.json", data, dir)
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
		// What ONTAP's nas.unix_permissions takes: 1 to 4 octal digits.
		if !regexp.MustCompile(`^[0-7]{1,4}$`).MatchString(cfg.Defaults.UnixPermissions) {
			t.Fatalf("accepted permissions %q", cfg.Defaults.UnixPermissions)
		}
		// A long enough password never shows in the printed config.
		if pw := string(cfg.Password); len(pw) >= 16 && strings.Contains(cfg.String(), pw) {
			t.Fatalf("password shown")
		}
	})
}
