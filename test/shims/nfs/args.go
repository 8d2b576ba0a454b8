package main

import (
	"fmt"
	"strings"
)

// request is a parsed mount command line.
type request struct {
	nfs      bool
	source   string // server:/path
	target   string
	options  []string
	readOnly bool
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// parseArgs understands the mount(8) forms the node plugin and people use
// (mount -t nfs [-o opts] src dir, -tnfs, --types=nfs, -oopts, --options
// opts, -r/--read-only) and the helper form mount(8) itself runs
// (mount.nfs src dir [-o opts]). Only an NFS request is parsed strictly; any
// other command line goes to the real mount untouched, so unknown flags are
// its business.
func parseArgs(prog string, args []string) (*request, error) {
	r := &request{}
	fsType := ""
	switch prog {
	case "mount.nfs", "mount.nfs4":
		fsType = strings.TrimPrefix(prog, "mount.")
	}
	var positional []string
	var unknown []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() (string, error) {
			if i+1 >= len(args) {
				return "", usagef("option %s needs a value", a)
			}
			i++
			return args[i], nil
		}
		switch {
		case a == "--":
			positional = append(positional, args[i+1:]...)
			i = len(args)
		case a == "-t" || a == "--types":
			v, err := next()
			if err != nil {
				return nil, err
			}
			fsType = v
		case strings.HasPrefix(a, "--types="):
			fsType = strings.TrimPrefix(a, "--types=")
		case strings.HasPrefix(a, "-t") && !strings.HasPrefix(a, "--"):
			fsType = a[2:]
		case a == "-o" || a == "--options":
			v, err := next()
			if err != nil {
				return nil, err
			}
			r.options = append(r.options, splitOpts(v)...)
		case strings.HasPrefix(a, "--options="):
			r.options = append(r.options, splitOpts(strings.TrimPrefix(a, "--options="))...)
		case strings.HasPrefix(a, "-o") && !strings.HasPrefix(a, "--"):
			r.options = append(r.options, splitOpts(a[2:])...)
		case a == "-r" || a == "--read-only":
			r.readOnly = true
		case a == "-w" || a == "--rw" || a == "--read-write":
			r.readOnly = false
		case a == "-v" || a == "-n" || a == "-s" || a == "-f" || a == "--verbose" || a == "--no-mtab":
			// Harmless for a bind mount.
		case strings.HasPrefix(a, "-"):
			unknown = append(unknown, a)
		default:
			positional = append(positional, a)
		}
	}
	if fsType != "nfs" && fsType != "nfs4" {
		return r, nil
	}
	r.nfs = true
	if len(unknown) > 0 {
		return nil, usagef("unsupported option %s", unknown[0])
	}
	if len(positional) != 2 {
		return nil, usagef("want exactly a source and a mount point, got %q", positional)
	}
	r.source, r.target = positional[0], positional[1]
	for _, o := range r.options {
		switch o {
		case "ro":
			r.readOnly = true
		case "rw":
			r.readOnly = false
		}
	}
	return r, nil
}

func splitOpts(s string) []string {
	var out []string
	for _, o := range strings.Split(s, ",") {
		if o = strings.TrimSpace(o); o != "" {
			out = append(out, o)
		}
	}
	return out
}

// splitSource splits server:/path; an IPv6 server is in brackets.
func splitSource(src string) (server, path string, err error) {
	if strings.HasPrefix(src, "[") {
		end := strings.Index(src, "]:")
		if end < 0 {
			return "", "", fmt.Errorf("%s: bad IPv6 source", src)
		}
		server, path = src[1:end], src[end+2:]
	} else {
		var ok bool
		server, path, ok = strings.Cut(src, ":")
		if !ok {
			return "", "", fmt.Errorf("%s: not server:/path", src)
		}
	}
	if server == "" || !strings.HasPrefix(path, "/") {
		return "", "", fmt.Errorf("%s: not server:/path", src)
	}
	return server, path, nil
}
