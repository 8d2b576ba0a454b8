package vm

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSlowSubtest(t *testing.T) {
	for _, tc := range []struct {
		line string
		want bool
	}{
		{"    --- PASS: TestCrash/stage/NodeStageVolume/recorded (12.34s)", true},
		{"    --- FAIL: TestMultipathMapLateOrNever/late (5.00s)", true},
		{"    --- PASS: TestMultipathMapLateOrNever/never (4.99s)", false},
		{"        --- PASS: TestCrossVolume/a/b (9.00s)", false}, // second level
		{"--- PASS: TestNFSEndToEnd (23.45s)", false},            // top level: logged anyway
		{"    --- SKIP: TestX/y (7.00s)", false},
		{"    kernelfaults_test.go:455: NodeStageVolume returned after 1m7.9s", false},
	} {
		if got := slowSubtest(tc.line); got != tc.want {
			t.Errorf("slowSubtest(%q) = %v, want %v", tc.line, got, tc.want)
		}
	}
}

func TestReadGuestCPU(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
		want          GuestCPU
		str           string
	}{
		{"busy", "1000 5000 200 7000 13000 1400\n", GuestCPU{Busy: 60 * time.Second, Total: 80 * time.Second, Step: 12 * time.Second},
			"75% busy (step 12s, daemons and kernel 48s)"},
		{"short", "1000 5000 200\n", GuestCPU{}, ""},
		{"garbage", "a b c d e f\n", GuestCPU{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(dir, tc.name)
			if err := os.WriteFile(f, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			got := readGuestCPU(f)
			if got != tc.want {
				t.Errorf("readGuestCPU = %+v, want %+v", got, tc.want)
			}
			if s := got.String(); s != tc.str {
				t.Errorf("String() = %q, want %q", s, tc.str)
			}
		})
	}
	if got := readGuestCPU(filepath.Join(dir, "missing")); got != (GuestCPU{}) {
		t.Errorf("a missing file: %+v", got)
	}
}
