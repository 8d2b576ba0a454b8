package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ontap-csi/ontap-csi/server"
)

func TestProbeSubcommand(t *testing.T) {
	uid := fmt.Sprintf("probe-test-%d", os.Getpid())
	h, err := server.ServePodHealth(uid, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(context.Background())
	for _, tc := range []struct {
		name     string
		args     []string
		env      string
		wantCode int
		wantMsg  string
	}{
		{"ready", []string{"readyz"}, uid, 0, ""},
		{"healthy, UID by flag", []string{"--pod-uid", uid, "healthz"}, "", 0, ""},
		{"another pod's process is not asked", []string{"readyz"}, uid + "-other", 1, "no ontap-csi process of pod " + uid + "-other answers"},
		{"no UID", []string{"readyz"}, "", 2, "no pod UID: set POD_UID"},
		{"no endpoint", nil, uid, 2, "want one of readyz, healthz"},
		{"unknown endpoint", []string{"metrics"}, uid, 2, "want one of readyz, healthz"},
		{"bad flag", []string{"--bogus", "readyz"}, uid, 2, "flag provided but not defined: -bogus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := probeMain(tc.args, tc.env, &stderr)
			msg := stderr.String()
			if code != tc.wantCode || !strings.Contains(msg, tc.wantMsg) || (msg != "" && strings.Count(msg, "\n") != 1) {
				t.Errorf("exit %d, stderr %q; want exit %d and one line with %q", code, msg, tc.wantCode, tc.wantMsg)
			}
		})
	}
}

// status still reports what it can read when kubelet's registration dir is
// missing (a wrong --kubelet-dir, or run outside the pod's host mount), and
// says what to check; it exits 1.
func TestStatusWithoutRegistrationDir(t *testing.T) {
	dir := t.TempDir()
	kubelet := filepath.Join(dir, "kubelet")
	if err := os.MkdirAll(filepath.Join(kubelet, "plugins", "csi.trident.netapp.io"), 0o750); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{}, {"--json"}} {
		out, code := runToExit(t, append([]string{"status", "--kubelet-dir=" + kubelet}, args...)...)
		if code != 1 || !strings.Contains(out, "no lease") || !strings.Contains(out, "check --kubelet-dir against kubelet's --root-dir") {
			t.Errorf("status %v: exit %d, output:\n%s", args, code, out)
		}
	}
}
