package cluster_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestExcusedFailures(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 19, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	r := &scenarioRun{}
	r.markDown("node-2", at(10), at(20))
	tests := []struct {
		name string
		rec  record
		want int
	}{
		{"in the span, on the node", record{At: at(15), Source: "kubelet", Class: classUnregistered, Text: "node-2: Operation failed"}, 1},
		{"at its ends", record{At: at(20), Source: "kubelet", Class: classUnregistered, Text: "node-2: x"}, 1},
		{"after the span", record{At: at(21), Source: "kubelet", Class: classUnregistered, Text: "node-2: x"}, 0},
		{"before the span", record{At: at(9), Source: "kubelet", Class: classUnregistered, Text: "node-2: x"}, 0},
		{"another node", record{At: at(15), Source: "kubelet", Class: classUnregistered, Text: "node-1: x"}, 0},
		{"a node whose name extends it", record{At: at(15), Source: "kubelet", Class: classUnregistered, Text: "node-22: x"}, 0},
		{"another class", record{At: at(15), Source: "kubelet", Class: "timeout", Text: "node-2: x"}, 0},
		{"not kubelet's", record{At: at(15), Source: "event", Class: classUnregistered, Text: "node-2: x"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.excused([]record{tt.rec}); got != tt.want {
				t.Errorf("excused %d, want %d", got, tt.want)
			}
		})
	}
}

func TestReadJournal(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		lines   int
		lastA   int
		fromA   int
		wantErr bool
	}{
		{"empty", "", 0, 0, 0, false},
		{"two writers and a torn last line", "1 2026-12-04T19:20:50.1Z db-0@a\n2 2026-12-04T19:20:50.3Z db-0@a\n3 2026-12-04T19:21:50Z db-0@b\n4 2026-12", 3, 2, 2, false},
		{"only the other writer", "7 2026-12-04T19:20:50Z db-0@b\n", 1, 0, 0, false},
		{"a bad time", "1 yesterday db-0@a\n", 0, 0, 0, true},
		{"a bad line", "1 2026-12-04T19:20:50Z\n", 0, 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "journal")
			if err := os.WriteFile(p, []byte(tt.text), 0o644); err != nil {
				t.Fatal(err)
			}
			lines, err := readJournal(p)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			if len(lines) != tt.lines {
				t.Fatalf("%d lines, want %d: %+v", len(lines), tt.lines, lines)
			}
			last, n := lastOf(lines, "db-0@a")
			if last.seq != tt.lastA || n != tt.fromA {
				t.Errorf("lastOf a: seq %d of %d, want %d of %d", last.seq, n, tt.lastA, tt.fromA)
			}
		})
	}
}
