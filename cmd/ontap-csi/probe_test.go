package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
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
