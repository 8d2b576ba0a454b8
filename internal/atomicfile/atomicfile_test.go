package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		name    string
		old     string // "" : no file before
		dirAt   bool   // a directory stands at the path: the rename fails
		durable bool
		perm    os.FileMode
		wantErr bool
	}{
		{name: "new file", perm: 0o600},
		{name: "replaces, durable", old: "old content", durable: true, perm: 0o644},
		{name: "replaces, not durable", old: "old content", perm: 0o600},
		{name: "a directory in the way", dirAt: true, perm: 0o600, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f.json")
			if tc.old != "" {
				if err := os.WriteFile(path, []byte(tc.old), 0o666); err != nil {
					t.Fatal(err)
				}
			}
			if tc.dirAt {
				if err := os.MkdirAll(filepath.Join(path, "x"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			err := Write(path, ".f.tmp-*", []byte("new"), tc.perm, tc.durable)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Write() = %v, want error %v", err, tc.wantErr)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Fatalf("directory holds %v; want only f.json (no temporary file left)", names)
			}
			if tc.wantErr {
				return
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != "new" {
				t.Fatalf("content %q, %v; want %q", got, err, "new")
			}
			st, err := os.Stat(path)
			if err != nil || st.Mode().Perm() != tc.perm {
				t.Fatalf("mode %v, %v; want %v", st.Mode().Perm(), err, tc.perm)
			}
		})
	}
}
