package filelock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// flock locks belong to open files, so two Acquires in one process are two
// holders: most tests need no second process. The helper process is for
// the one thing only a process can do, die while holding.
func TestMain(m *testing.M) {
	if path := os.Getenv("FILELOCK_HOLD"); path != "" {
		if _, err := Acquire(context.Background(), path, Exclusive, 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("locked")
		time.Sleep(time.Hour) // until killed
	}
	os.Exit(m.Run())
}

func lockPath(t *testing.T) string { return filepath.Join(t.TempDir(), "x.lock") }

func TestModesConflict(t *testing.T) {
	tests := []struct {
		held, asked Mode
		conflict    bool
	}{
		{Exclusive, Exclusive, true},
		{Exclusive, Shared, true},
		{Shared, Exclusive, true},
		{Shared, Shared, false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("held %d asked %d", tc.held, tc.asked), func(t *testing.T) {
			path := lockPath(t)
			held, err := Acquire(context.Background(), path, tc.held, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			defer held.Release()
			l, err := TryAcquire(path, tc.asked)
			if tc.conflict != errors.Is(err, ErrLocked) || (!tc.conflict && err != nil) {
				t.Fatalf("TryAcquire: %v, want conflict %v", err, tc.conflict)
			}
			if l != nil {
				l.Release()
			}
			if locked, err := Locked(path); err != nil || locked != (tc.held == Exclusive) {
				t.Fatalf("Locked = %v, %v with a %d holder", locked, err, tc.held)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			l, err = Acquire(ctx, path, tc.asked, 0o600)
			if tc.conflict != errors.Is(err, context.DeadlineExceeded) || (!tc.conflict && err != nil) {
				t.Fatalf("Acquire: %v, want conflict %v", err, tc.conflict)
			}
			if l != nil {
				l.Release()
			}
		})
	}
}

func TestMissingFile(t *testing.T) {
	path := lockPath(t)
	if _, err := TryAcquire(path, Exclusive); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("TryAcquire of a missing file: %v", err)
	}
	if locked, err := Locked(path); locked || err != nil {
		t.Fatalf("Locked of a missing file: %v, %v", locked, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("TryAcquire or Locked created the file")
	}
	l, err := Acquire(context.Background(), path, Exclusive, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if st, err := os.Stat(path); err != nil || st.Mode().Perm()&^0o640 != 0 {
		t.Fatalf("Acquire made %v, %v; want a file of at most 0640", st, err)
	}
}

// Both ways of waiting (kernel and polling) get the lock once it is free,
// and a waiter that opened the file before its holder removed it ends up
// holding the file now at the path, not the unlinked one.
func TestWaiterAfterRemoveLocksTheFileAtThePath(t *testing.T) {
	for name, ctx := range map[string]context.Context{"kernel": context.Background(), "polling": t.Context()} {
		t.Run(name, func(t *testing.T) {
			path := lockPath(t)
			first, err := Acquire(ctx, path, Exclusive, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan *Lock)
			go func() {
				l, err := Acquire(ctx, path, Exclusive, 0o600)
				if err != nil {
					t.Error(err)
				}
				got <- l
			}()
			select {
			case <-got:
				t.Fatal("a second holder got an exclusive lock")
			case <-time.After(50 * time.Millisecond): // the waiter has opened the file
			}
			if err := first.Remove(); err != nil {
				t.Fatal(err)
			}
			if first.Linked() {
				t.Fatal("Linked after Remove")
			}
			first.Release()
			second := <-got
			defer second.Release()
			if !second.Linked() {
				t.Fatal("the waiter holds the unlinked file")
			}
			if _, err := TryAcquire(path, Shared); !errors.Is(err, ErrLocked) {
				t.Fatalf("the file at the path is not locked: %v", err)
			}
		})
	}
}

func TestRemoveLeavesAReplacedFileAlone(t *testing.T) {
	path := lockPath(t)
	l, err := Acquire(context.Background(), path, Exclusive, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if l.Path() != path {
		t.Fatalf("Path() = %s", l.Path())
	}
	if err := os.Rename(path, path+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if l.Linked() {
		t.Fatal("Linked with another file at the path")
	}
	if err := l.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("Remove removed the file that replaced the lock's: %v", err)
	}
}

func TestReleaseIsIdempotent(t *testing.T) {
	path := lockPath(t)
	l, err := Acquire(context.Background(), path, Exclusive, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	again, err := TryAcquire(path, Exclusive)
	if err != nil {
		t.Fatalf("lock not free after Release: %v", err)
	}
	again.Release()
}

func TestDeadHolderReleases(t *testing.T) {
	path := lockPath(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FILELOCK_HOLD="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, _ := bufio.NewReader(out).ReadString('\n'); strings.TrimSpace(line) != "locked" {
		t.Fatalf("helper said %q", line)
	}
	if locked, err := Locked(path); !locked || err != nil {
		t.Fatalf("Locked while another process holds it: %v, %v", locked, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if locked, err := Locked(path); locked || err != nil {
		t.Fatalf("Locked after the holder was killed: %v, %v", locked, err)
	}
}
