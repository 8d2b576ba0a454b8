package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"
)

// runToExit runs the binary to completion and returns its combined output
// and exit code.
func runToExit(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("running ontap-csi: %v", err)
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("ontap-csi %v did not exit", args)
	}
	return string(out), exitCode(err)
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

var metricsAddrRE = regexp.MustCompile(`msg="serving /healthz[^\n]*address="?(127\.0\.0\.1:\d+)`)

// metricsAddr reads the bound health/metrics address from the process log.
func metricsAddr(t *testing.T, p *proc) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m := metricsAddrRE.FindStringSubmatch(p.logs()); m != nil {
			return m[1]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no metrics address in log:\n%s", p.logs())
	return ""
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b)
}

// shortTempDir is a temp dir with a short path: kubelet's socket paths below
// it must fit the 107-byte unix socket limit, which t.TempDir()'s long
// names break.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "oc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
