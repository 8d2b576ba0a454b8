package iscsi

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// loadTree builds the sysfs tree that a testdata/sysfs/*.tree file
// describes under a temp dir and returns its root. Lines: "path = value"
// (an attribute, newline added), "path -> target" (a symlink), "path/" (a
// directory); '#' starts a comment. Kept as text because the kernel's
// names (connection1:0) are not valid file names in a Go module.
func loadTree(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "sysfs", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	root := t.TempDir()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var err error
		switch {
		case strings.Contains(line, " -> "):
			p, target, _ := strings.Cut(line, " -> ")
			p = filepath.Join(root, p)
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				err = os.Symlink(target, p)
			}
		case strings.Contains(line, " = "):
			p, v, _ := strings.Cut(line, " = ")
			p = filepath.Join(root, p)
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				err = os.WriteFile(p, []byte(v+"\n"), 0o644)
			}
		case strings.HasSuffix(line, "/"):
			err = os.MkdirAll(filepath.Join(root, line), 0o755)
		default:
			t.Fatalf("%s: odd line %q", name, line)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestSysfsSessions(t *testing.T) {
	const other = "iqn.2003-01.org.linux-iscsi.x:sn.1"
	for _, tc := range []struct {
		tree string
		ok   bool // sysfs answers; false: iscsiadm is asked
		want []session
	}{
		{tree: "sessions.tree", ok: true, want: []session{
			{ID: 2, Portal: "10.0.0.1:3260", TPGT: 1, Target: testIQN},
			{ID: 4, Portal: "192.168.7.2:3261", TPGT: 1, Target: other},
			{ID: 10, Portal: "[fd20::11]:3260", TPGT: 1, Target: testIQN},
		}},
		{tree: "empty.tree", ok: true},
		{tree: "noclass.tree", ok: true},
		{tree: "nosys.tree"},
		{tree: "noconn.tree"},
		{tree: "nulltarget.tree"},
		{tree: "notarget.tree"},
		{tree: "badport.tree"},
		{tree: "noaddr.tree"},
		{tree: "partial.tree"},
	} {
		t.Run(tc.tree, func(t *testing.T) {
			c := &Client{sysRoot: loadTree(t, tc.tree)}
			got, ok := c.sysfsSessions()
			if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("sysfsSessions() = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestSessionsAsksIscsiadmOnlyWhenSysfsDoesNotSay: the session list comes
// from sysfs without a process; a session sysfs cannot describe sends the
// whole list to iscsiadm.
func TestSessionsAsksIscsiadmOnlyWhenSysfsDoesNotSay(t *testing.T) {
	for _, tc := range []struct {
		tree     string
		iscsiadm int
		portals  []string
	}{
		{tree: "sessions.tree", iscsiadm: 0, portals: []string{"10.0.0.1:3260", "192.168.7.2:3261", "[fd20::11]:3260"}},
		{tree: "empty.tree", iscsiadm: 0},
		{tree: "partial.tree", iscsiadm: 1, portals: []string{"10.0.0.1:3260"}},
		{tree: "noclass.tree", iscsiadm: 0},
		{tree: "nosys.tree", iscsiadm: 1, portals: []string{"10.0.0.1:3260"}},
	} {
		t.Run(tc.tree, func(t *testing.T) {
			ex := &fakeExec{fn: func(argv []string) ([]byte, error) { return sessionLines(1), nil }}
			c, err := New(Config{Exec: ex, SysRoot: loadTree(t, tc.tree), LockDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			ss, err := c.sessions(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var portals []string
			for _, s := range ss {
				portals = append(portals, s.Portal)
			}
			if n := ex.called("iscsiadm -m session"); n != tc.iscsiadm || !reflect.DeepEqual(portals, tc.portals) {
				t.Fatalf("portals %v with %d iscsiadm runs; want %v with %d", portals, n, tc.portals, tc.iscsiadm)
			}
		})
	}
}
