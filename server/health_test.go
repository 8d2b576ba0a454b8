package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
)

func TestHealthEndpoints(t *testing.T) {
	ready := false
	h, err := ServeHealth("127.0.0.1:0", func() bool { return ready }, false)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(context.Background())
	get := func(path string) int {
		resp, err := http.Get(fmt.Sprintf("http://%s%s", h.Addr(), path))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := get("/healthz"); c != 200 {
		t.Errorf("/healthz = %d", c)
	}
	if c := get("/readyz"); c != 503 {
		t.Errorf("/readyz while not ready = %d, want 503", c)
	}
	ready = true
	if c := get("/readyz"); c != 200 {
		t.Errorf("/readyz while ready = %d", c)
	}
}

// Two node pods on the host network bind the same port during a surge
// rollout; the second must not fail.
func TestSharedHealthPort(t *testing.T) {
	a, err := ServeHealth("127.0.0.1:0", nil, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	b, err := ServeHealth(a.Addr().String(), nil, true)
	if err != nil {
		t.Fatalf("second process on the shared port: %v", err)
	}
	defer b.Shutdown(context.Background())
	if _, err := ServeHealth(a.Addr().String(), nil, false); err == nil {
		t.Fatal("an unshared bind of a port in use succeeded; the test proves nothing")
	}
}

// Each node pod answers for itself on its own health socket, even while
// two pods share the host's network and its health port.
func TestPodHealthSocket(t *testing.T) {
	uid := func(name string) string { return fmt.Sprintf("%s-%d-%s", t.Name(), os.Getpid(), name) }
	ready, standbyStarting := uid("ready"), uid("starting")
	for _, p := range []struct {
		uid   string
		ready bool
	}{{ready, true}, {standbyStarting, false}} {
		h, err := ServePodHealth(p.uid, func() bool { return p.ready })
		if err != nil {
			t.Fatal(err)
		}
		defer h.Shutdown(context.Background())
	}
	ctx := context.Background()
	if err := ProbePodHealth(ctx, ready, "/readyz"); err != nil {
		t.Errorf("ready pod: %v", err)
	}
	if err := ProbePodHealth(ctx, standbyStarting, "/readyz"); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("starting pod /readyz: %v, want 503", err)
	}
	if err := ProbePodHealth(ctx, standbyStarting, "/healthz"); err != nil {
		t.Errorf("starting pod /healthz: %v", err)
	}
	if err := ProbePodHealth(ctx, uid("gone"), "/readyz"); err == nil || !strings.Contains(err.Error(), "no ontap-csi process of pod") {
		t.Errorf("pod without a process: %v", err)
	}
}
