package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
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
