// Package lif reads the address of an ONTAP management LIF as a backend
// config gives it, for the config parser (which reports a bad one) and the
// REST client (which connects to it) alike.
package lif

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// HostPort turns a managementLIF value ("host", "host:port", "[v6addr]",
// "[v6addr]:port" or a bare IPv6 address) into host:port, port 443 by
// default.
func HostPort(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("management LIF is required")
	}
	if strings.ContainsAny(s, "/?#@ ") {
		return "", fmt.Errorf("management LIF %q must be a host or host:port, not a URL", s)
	}
	host, port, err := split(s)
	if err != nil {
		return "", err
	}
	if host == "" {
		return "", fmt.Errorf("management LIF %q has no host", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("management LIF %q has an invalid port %q", s, port)
	}
	if net.ParseIP(host) == nil && !ValidHostname(host) {
		return "", fmt.Errorf("management LIF %q: %q is neither an IP address nor a host name", s, host)
	}
	return net.JoinHostPort(host, port), nil
}

// split separates host and port; the port is "443" when s names none.
func split(s string) (host, port string, err error) {
	host, port = s, "443"
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.Index(s, "]")
		if end < 0 {
			return "", "", fmt.Errorf("management LIF %q has an unterminated [", s)
		}
		host = s[1:end]
		if rest := s[end+1:]; rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return "", "", fmt.Errorf("management LIF %q has junk after ]", s)
			}
			port = rest[1:]
		}
		if ip := net.ParseIP(host); ip == nil || ip.To4() != nil {
			return "", "", fmt.Errorf("management LIF %q: %q in brackets is not an IPv6 address", s, host)
		}
	case strings.Count(s, ":") > 1:
		if net.ParseIP(s) == nil {
			return "", "", fmt.Errorf("management LIF %q is not a valid address (put IPv6 addresses in brackets)", s)
		}
	case strings.Contains(s, ":"):
		host, port, _ = strings.Cut(s, ":")
	}
	return host, port, nil
}

// ValidHostname reports whether h is a DNS host name (RFC 1123 labels).
func ValidHostname(h string) bool {
	if len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
				return false
			}
		}
	}
	return true
}
