package volumelock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The helper process locks a volume, prints "locked", and then either
// exits after a number of increments of a shared counter file or waits to be
// killed, depending on its mode.
func TestMain(m *testing.M) {
	if mode := os.Getenv("VOLUMELOCK_HELPER"); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

func helper(mode string) int {
	dir, vol := os.Getenv("VOLUMELOCK_DIR"), os.Getenv("VOLUMELOCK_VOLUME")
	l, err := New(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	switch mode {
	case "hold":
		if _, err := l.Lock(context.Background(), vol); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("locked")
		time.Sleep(time.Hour) // until killed
	case "count":
		n, _ := strconv.Atoi(os.Getenv("VOLUMELOCK_N"))
		for i := 0; i < n; i++ {
			unlock, err := l.Lock(context.Background(), vol)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			if err := increment(filepath.Join(dir, "counter")); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			unlock()
		}
		return 0
	}
	return 2
}

// increment is a deliberately racy read-modify-write: it only gives the right
// total if the lock really excludes every other holder.
func increment(path string) error {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return os.WriteFile(path, []byte(strconv.Itoa(n+1)), 0o600)
}

func helperCmd(t *testing.T, mode, dir, vol string, extra ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "VOLUMELOCK_HELPER="+mode, "VOLUMELOCK_DIR="+dir, "VOLUMELOCK_VOLUME="+vol)
	cmd.Env = append(cmd.Env, extra...)
	cmd.Stderr = os.Stderr
	return cmd
}

func TestExcludesGoroutinesAndProcesses(t *testing.T) {
	dir := t.TempDir()
	const procs, perProc, goroutines = 3, 40, 4
	l, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}

	var cmds []*exec.Cmd
	for i := 0; i < procs; i++ {
		cmd := helperCmd(t, "count", dir, "pvc-1", "VOLUMELOCK_N="+strconv.Itoa(perProc))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perProc; i++ {
				unlock, err := l.Lock(context.Background(), "pvc-1")
				if err != nil {
					errs <- err
					return
				}
				if err := increment(filepath.Join(dir, "counter")); err != nil {
					errs <- err
				}
				unlock()
			}
		}()
	}
	wg.Wait()
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper process: %v", err)
		}
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "counter"))
	if got, want := strings.TrimSpace(string(b)), strconv.Itoa((procs+goroutines)*perProc); got != want {
		t.Fatalf("counter = %s, want %s: the lock let two holders in", got, want)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*.lock"))
	if len(left) != 0 {
		t.Fatalf("lock files left behind: %v", left)
	}
}

func TestDeadHolderReleasesLock(t *testing.T) {
	dir := t.TempDir()
	cmd := helperCmd(t, "hold", dir, "pvc-2")
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

	l, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := l.Lock(ctx, "pvc-2"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock while another process holds it: err = %v, want deadline exceeded", err)
	}
	// A different volume is independent.
	unlockOther, err := l.Lock(context.Background(), "pvc-3")
	if err != nil {
		t.Fatal(err)
	}
	unlockOther()

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	unlock, err := l.Lock(ctx2, "pvc-2")
	if err != nil {
		t.Fatalf("Lock after the holder was killed: %v", err)
	}
	unlock()
	unlock() // a second call is harmless
}

func TestCancelledWaiterDoesNotBlockOthers(t *testing.T) {
	l, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := l.Lock(context.Background(), "v")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := l.Lock(ctx, "v")
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: err = %v", err)
	}
	unlock()
	unlock2, err := l.Lock(context.Background(), "v")
	if err != nil {
		t.Fatal(err)
	}
	unlock2()
}

func TestFileNameConfinesUntrustedIDs(t *testing.T) {
	for _, id := range []string{
		"pvc-0a1b", "../../etc/passwd", "/abs", "a/b", ".hidden", "..", strings.Repeat("x", 300), "nul\x00byte", "trident_pvc_1.2",
	} {
		name := fileName(id)
		if strings.ContainsAny(name, "/\x00") || strings.HasPrefix(name, ".") || len(name) > 200 {
			t.Errorf("fileName(%q) = %q escapes or is unusable", id, name)
		}
	}
	if fileName("pvc-1") != "pvc-1.lock" {
		t.Errorf("a plain id should keep a readable file name, got %q", fileName("pvc-1"))
	}
	if fileName("a/b") == fileName("a_b") {
		t.Error("distinct ids must not share a lock file")
	}
	if _, err := (&Locker{dir: t.TempDir()}).Lock(context.Background(), ""); err == nil {
		t.Error("empty id must be refused")
	}
}

// TestSharedLocks: shared holders coexist, in this process and against
// another process's shared holder; an exclusive holder excludes them and is
// excluded by them; a shared locker that comes while an exclusive one waits
// queues behind it.
func TestSharedLocks(t *testing.T) {
	dir := t.TempDir()
	l, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	short := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	for _, tc := range []struct {
		name       string
		hold       []bool // true: shared
		take       bool   // shared?
		wantLocked bool
	}{
		{"shared with shared", []bool{true, true}, true, true},
		{"exclusive with shared", []bool{true}, false, false},
		{"shared with exclusive", []bool{false}, true, false},
		{"shared alone", nil, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var unlocks []func()
			defer func() {
				for _, u := range unlocks {
					u()
				}
			}()
			for _, shared := range tc.hold {
				lock := l.Lock
				if shared {
					lock = l.LockShared
				}
				u, err := lock(context.Background(), "tgt")
				if err != nil {
					t.Fatal(err)
				}
				unlocks = append(unlocks, u)
			}
			lock := l.Lock
			if tc.take {
				lock = l.LockShared
			}
			u, err := lock(short(), "tgt")
			if (err == nil) != tc.wantLocked {
				t.Fatalf("locked: %v (%v), want %v", err == nil, err, tc.wantLocked)
			}
			if u != nil {
				u()
			}
		})
	}

	t.Run("another process's exclusive holder", func(t *testing.T) {
		cmd := helperCmd(t, "hold", dir, "tgt2")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		defer cmd.Process.Kill()
		if line, _ := bufio.NewReader(out).ReadString('\n'); line != "locked\n" {
			t.Fatalf("helper said %q", line)
		}
		if _, err := l.LockShared(short(), "tgt2"); err == nil {
			t.Fatal("shared lock taken while another process holds it exclusively")
		}
	})

	t.Run("shared lockers queue behind a waiting exclusive one", func(t *testing.T) {
		first, err := l.LockShared(context.Background(), "tgt3")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan func(), 1)
		go func() {
			u, err := l.Lock(context.Background(), "tgt3")
			if err != nil {
				t.Error(err)
			}
			got <- u
		}()
		time.Sleep(50 * time.Millisecond) // the exclusive locker waits
		if _, err := l.LockShared(short(), "tgt3"); err == nil {
			t.Fatal("a shared lock overtook the waiting exclusive locker")
		}
		first()
		select {
		case u := <-got:
			u()
		case <-time.After(5 * time.Second):
			t.Fatal("the exclusive locker did not get the lock after the shared one left")
		}
	})
}
