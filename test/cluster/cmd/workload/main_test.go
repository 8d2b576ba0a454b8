package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLastSeq: a journal's torn last line (no newline, or garbage such as
// the zeros a file system leaves when it kept the size and not the data)
// is cut off and the sequence goes on from the last whole line; garbage
// before the last line is an error.
func TestLastSeq(t *testing.T) {
	for _, tc := range []struct {
		name, journal, after string
		seq                  int
		err                  bool
	}{
		{"whole", "1 a p\n2 b p\n", "1 a p\n2 b p\n", 2, false},
		{"empty", "", "", 0, false},
		{"torn last line", "1 a p\n2 b", "1 a p\n", 1, false},
		{"zeros at the end", "1 a p\n\x00\x00\x00\x00", "1 a p\n", 1, false},
		{"zeros with a newline at the end", "1 a p\n\x00\x00\n", "1 a p\n", 1, false},
		{"garbage before the last line", "1 a p\nxx\n3 c p\n", "1 a p\nxx\n3 c p\n", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal")
			if err := os.WriteFile(path, []byte(tc.journal), 0o644); err != nil {
				t.Fatal(err)
			}
			seq, err := lastSeq(path)
			if (err != nil) != tc.err || seq != tc.seq {
				t.Fatalf("lastSeq = %d, %v; want %d, error %v", seq, err, tc.seq, tc.err)
			}
			if b, _ := os.ReadFile(path); string(b) != tc.after {
				t.Fatalf("journal after: %q, want %q", b, tc.after)
			}
		})
	}
}
