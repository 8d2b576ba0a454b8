package iscsi

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

const netappIQN = "iqn.1992-08.com.netapp:sn.574caf71890911e8a6b7005056b4ea79:vs.2"

func TestParseSessions(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []session
		bad  bool
	}{
		{name: "empty", in: ""},
		{
			name: "open-iscsi 2.1",
			in: "tcp: [1] 10.0.0.1:3260,1029 " + netappIQN + " (non-flash)\n" +
				"tcp: [12] [fd20::11]:3260,1030 " + netappIQN + " (non-flash)\n",
			want: []session{
				{ID: 1, Transport: "tcp", Portal: "10.0.0.1:3260", TPGT: 1029, Target: netappIQN},
				{ID: 12, Transport: "tcp", Portal: "[fd20::11]:3260", TPGT: 1030, Target: netappIQN},
			},
		},
		{
			name: "older iscsiadm without flash marker, iser",
			in:   "iser: [3] 192.168.1.5:3260,1 iqn.2000-01.com.example:t1\n",
			want: []session{{ID: 3, Transport: "iser", Portal: "192.168.1.5:3260", TPGT: 1, Target: "iqn.2000-01.com.example:t1"}},
		},
		{name: "garbage line", in: "iscsiadm: No active sessions.\n", bad: true},
		{name: "no sid", in: "tcp: [] 10.0.0.1:3260,1 " + netappIQN + "\n", bad: true},
		{name: "target looks like an option", in: "tcp: [1] 10.0.0.1:3260,1 -o\n", bad: true},
		{name: "bad portal", in: "tcp: [1] 10.0.0.1:99999,1 " + netappIQN + "\n", bad: true},
		{name: "huge sid", in: "tcp: [99999999999] 10.0.0.1:3260,1 " + netappIQN + "\n", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSessions([]byte(tc.in))
			if tc.bad != (err != nil) {
				t.Fatalf("err %v, want bad=%v", err, tc.bad)
			}
			if !tc.bad && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseNodeRecords(t *testing.T) {
	// The second is a record made with -o new, as open-iscsi 2.1 lists it.
	got, err := parseNodeRecords([]byte("10.0.0.1:3260,-1 " + netappIQN + "\n10.0.0.2:3260,4294967295 " + netappIQN +
		"\n[fd20::11]:3260,1030 " + netappIQN + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []nodeRecord{{Portal: "10.0.0.1:3260", Target: netappIQN}, {Portal: "10.0.0.2:3260", Target: netappIQN}, {Portal: "[fd20::11]:3260", Target: netappIQN}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v", got)
	}
	for _, bad := range []string{"10.0.0.1:3260 " + netappIQN, "10.0.0.1:3260,-1 notaniqn", "-x,1 " + netappIQN, "a b,1 " + netappIQN,
		"10.0.0.1:3260,4294967296 " + netappIQN, "10.0.0.1:3260,-2 " + netappIQN} {
		if _, err := parseNodeRecords([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestNormalizePortal(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.1":            "10.0.0.1:3260",
		"10.0.0.1:3261":       "10.0.0.1:3261",
		"[fd20::11]":          "[fd20::11]:3260",
		"[FD20:0::11]:3260":   "[fd20::11]:3260",
		"fd20::11":            "[fd20::11]:3260",
		"::ffff:10.0.0.1":     "10.0.0.1:3260",
		"lif-1.Example.com":   "lif-1.example.com:3260",
		"lif-1.example.com:1": "lif-1.example.com:1",
		"":                    "",
		"-p":                  "",
		"10.0.0.1:":           "",
		"10.0.0.1:03260":      "",
		"10.0.0.1:65536":      "",
		"[fd20::11":           "",
		"[fd20::11]3260":      "",
		"host name":           "",
		"[lif1]:3260":         "",
		"a/b:3260":            "",
	} {
		got, err := normalizePortal(in)
		if want == "" {
			if err == nil {
				t.Errorf("%q: got %q, want an error", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%q: got %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestParseVPDPage80(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{name: "ONTAP", in: append([]byte{0, 0x80, 0, 12}, "80CLbB+Y6sfd"...), want: "80CLbB+Y6sfd"},
		{name: "padded, trailing data", in: append([]byte{0, 0x80, 0, 14}, " 80CLbB+Y6sfd\x00xx"...), want: "80CLbB+Y6sfd"},
		{name: "short", in: []byte{0, 0x80, 0}},
		{name: "other page", in: append([]byte{0, 0x83, 0, 3}, "abc"...)},
		{name: "length past the end", in: append([]byte{0, 0x80, 0, 13}, "80CLbB+Y6sfd"...)},
		{name: "blank", in: append([]byte{0, 0x80, 0, 2}, "  "...)},
		{name: "control character", in: append([]byte{0, 0x80, 0, 3}, "a\nb"...)},
	} {
		got, err := parseVPDPage80(tc.in)
		if tc.want == "" {
			if err == nil {
				t.Errorf("%s: got %q, want an error", tc.name, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

func TestParseSmallAttributes(t *testing.T) {
	if a, err := parseSCSIAddr("2:0:0:17"); err != nil || a != (scsiAddr{2, 0, 0, 17}) || a.String() != "2:0:0:17" {
		t.Errorf("parseSCSIAddr: %+v, %v", a, err)
	}
	for _, bad := range []string{"2:0:0", "2:0:0:x", "2:0:0:01", "-1:0:0:0", "2:0:0:0:0", ".new-2:0:0:1"} {
		if _, err := parseSCSIAddr(bad); err == nil {
			t.Errorf("parseSCSIAddr(%q) succeeded", bad)
		}
	}
	if h, err := parseHostName("host12"); err != nil || h != 12 {
		t.Errorf("parseHostName: %d, %v", h, err)
	}
	for _, bad := range []string{"host", "hosta", "session1", "host-1"} {
		if _, err := parseHostName(bad); err == nil {
			t.Errorf("parseHostName(%q) succeeded", bad)
		}
	}
	if n, err := parseSectors([]byte("2097152\n")); err != nil || n != 1<<30 {
		t.Errorf("parseSectors: %d, %v", n, err)
	}
	for _, bad := range []string{"", "-1", "1e9", "18014398509481984"} {
		if _, err := parseSectors([]byte(bad)); err == nil {
			t.Errorf("parseSectors(%q) succeeded", bad)
		}
	}
}

// The fuzz targets check that untrusted tool and sysfs output never panics
// a parser and that whatever is accepted is safe to use as an argv item or
// path component.

func FuzzParseSessions(f *testing.F) {
	f.Add([]byte("tcp: [1] 10.0.0.1:3260,1029 " + netappIQN + " (non-flash)\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ss, err := parseSessions(data)
		if err != nil {
			return
		}
		for _, s := range ss {
			if p, err := normalizePortal(s.Portal); err != nil || p != s.Portal {
				t.Fatalf("portal %q is not normalized: %q, %v", s.Portal, p, err)
			}
			if validateIQN(s.Target) != nil || strings.HasPrefix(s.Target, "-") {
				t.Fatalf("target %q accepted", s.Target)
			}
		}
	})
}

func FuzzParseNodeRecords(f *testing.F) {
	f.Add([]byte("10.0.0.1:3260,-1 " + netappIQN + "\n"))
	f.Add([]byte("10.0.0.1:3260,4294967295 " + netappIQN + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := parseNodeRecords(data)
		if err != nil {
			return
		}
		for _, r := range recs {
			if p, err := normalizePortal(r.Portal); err != nil || p != r.Portal || validateIQN(r.Target) != nil {
				t.Fatalf("record %+v accepted", r)
			}
		}
	})
}

func FuzzNormalizePortal(f *testing.F) {
	for _, s := range []string{"10.0.0.1", "[fd20::11]:3260", "lif.example.com:3261", "fd20::11"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		p, err := normalizePortal(in)
		if err != nil {
			return
		}
		again, err := normalizePortal(p)
		if err != nil || again != p {
			t.Fatalf("%q -> %q -> %q, %v: not idempotent", in, p, again, err)
		}
		if strings.HasPrefix(p, "-") || strings.ContainsAny(p, " \t\n/,\x00") || !utf8.ValidString(p) {
			t.Fatalf("%q -> %q", in, p)
		}
	})
}

func FuzzParseVPDPage80(f *testing.F) {
	f.Add(append([]byte{0, 0x80, 0, 12}, "80CLbB+Y6sfd"...))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := parseVPDPage80(data)
		if err != nil {
			return
		}
		if s == "" || len(s) > len(data)-4 {
			t.Fatalf("serial %q from %d bytes", s, len(data))
		}
		for _, r := range s {
			if r < ' ' || r > '~' {
				t.Fatalf("unprintable serial %q", s)
			}
		}
	})
}

func FuzzParseSCSIAddr(f *testing.F) {
	f.Add("2:0:0:17")
	f.Fuzz(func(t *testing.T, in string) {
		a, err := parseSCSIAddr(in)
		if err == nil && a.String() != in {
			t.Fatalf("%q parsed as %s", in, a)
		}
	})
}
