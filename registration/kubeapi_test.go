package registration

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/client-go/rest"
)

// Ping is a GET of /version with the config's credentials, under the
// host's path prefix, that fails unless the answer is 200.
func TestKubeAPIPing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		ok     bool
	}{
		{"answers", http.StatusOK, true},
		{"unavailable", http.StatusServiceUnavailable, false},
		{"unauthorized", http.StatusUnauthorized, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reqs := make(chan *http.Request, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reqs <- r
				w.WriteHeader(tc.status)
			}))
			t.Cleanup(srv.Close)
			api, err := kubeAPIFor(&rest.Config{Host: srv.URL + "/prefix", BearerToken: "sa-token"})
			if err != nil {
				t.Fatal(err)
			}
			err = api.Ping(context.Background())
			if (err == nil) != tc.ok {
				t.Errorf("Ping() = %v, want ok=%v", err, tc.ok)
			}
			var got *http.Request
			select {
			case got = <-reqs:
			default:
				t.Fatal("no request reached the server")
			}
			if got.Method != http.MethodGet || got.URL.Path != "/prefix/version" {
				t.Errorf("request %s %s, want GET /prefix/version", got.Method, got.URL.Path)
			}
			if a := got.Header.Get("Authorization"); a != "Bearer sa-token" {
				t.Errorf("Authorization %q", a)
			}
		})
	}
}

func TestKubeAPIPingUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	api, err := kubeAPIFor(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Ping(context.Background()); err == nil {
		t.Error("Ping of a closed server succeeded")
	}
}

// kubeAPIFor builds the access as the binary does: one HTTP client for the
// dynamic client and Ping.
func kubeAPIFor(cfg *rest.Config) (*KubeAPI, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return NewKubeAPI(cfg, hc)
}
