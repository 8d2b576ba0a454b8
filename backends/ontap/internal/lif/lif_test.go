package lif

import "testing"

func TestHostPort(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.1":           "10.0.0.1:443",
		"10.0.0.1:8443":      "10.0.0.1:8443",
		"cluster.example":    "cluster.example:443",
		"cluster.example:80": "cluster.example:80",
		"[fd00::1]":          "[fd00::1]:443",
		"[fd00::1]:8443":     "[fd00::1]:8443",
		"fd00::1":            "[fd00::1]:443",
	} {
		got, err := HostPort(in)
		if err != nil || got != want {
			t.Errorf("HostPort(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "https://10.0.0.1", "10.0.0.1:0", "10.0.0.1:x", "[10.0.0.1]", "[fd00::1", "fd00::zz", "a b", "-bad-.example", "user@host"} {
		if got, err := HostPort(bad); err == nil {
			t.Errorf("HostPort(%q) = %q, want error", bad, got)
		}
	}
}
