// Command workload is what the test pods run on their CSI volumes.
//
//	workload keep  --dir /data   the long-lived workload: keeps its volume
//	                             busy and fails loudly the moment it breaks
//	workload churn --dir /data   the short-lived pod the test creates and
//	                             deletes in a loop: proves each new mount works
//	workload put   --dir /data --file F --content C
//	                             writes C to F (fsynced)
//	workload get   --dir /data --file F --content C
//	                             reads F and exits 1 unless it holds C
//	workload statfs --dir /data  prints the file system's size whenever it
//	                             changes ("size N")
//	workload ok                  exits 0 once the mode above succeeded: the
//	                             readiness probe of the put, get and statfs pods
//
// keep writes a seed file once (with its SHA-256 beside it) and then
// appends a numbered line to "journal" every --interval, fsyncing each one,
// so the test can check from the storage side that no write was lost and
// the sequence never broke. Before every write it checks that the seed is
// still there and that the directory is still the same mount (device
// number); any failure exits 1, which the kubelet records as a container
// restart that the test sees. churn writes, syncs and reads back one file
// and then waits for SIGTERM.
package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: workload keep|churn --dir DIR")
		os.Exit(2)
	}
	mode := os.Args[1]
	fl := flag.NewFlagSet(mode, flag.ExitOnError)
	dir := fl.String("dir", "/data", "volume mount point")
	interval := fl.Duration("interval", 200*time.Millisecond, "keep: time between journal lines")
	file := fl.String("file", "data", "put, get: the file")
	content := fl.String("content", "", "put, get: what the file holds")
	_ = fl.Parse(os.Args[2:])
	pod := os.Getenv("POD_NAME")

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)

	var err error
	switch mode {
	case "keep":
		err = keep(*dir, pod, *interval, stop)
	case "churn":
		err = churn(*dir, pod, stop)
	case "put":
		err = put(filepath.Join(*dir, *file), *content, stop)
	case "get":
		err = get(filepath.Join(*dir, *file), *content, stop)
	case "statfs":
		err = watchSize(*dir, stop)
	case "ok":
		_, err = os.Stat(okMarker)
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s workload %s: %v\n", time.Now().UTC().Format(time.RFC3339Nano), mode, err)
		os.Exit(1)
	}
}

func keep(dir, pod string, interval time.Duration, stop <-chan os.Signal) error {
	dev, err := device(dir)
	if err != nil {
		return err
	}
	if err := ensureSeed(dir); err != nil {
		return err
	}
	seq, err := lastSeq(filepath.Join(dir, "journal"))
	if err != nil {
		return err
	}
	j, err := os.OpenFile(filepath.Join(dir, "journal"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer j.Close()
	fmt.Printf("keeping %s (device %d) from seq %d\n", dir, dev, seq+1)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			fmt.Printf("stopping at seq %d\n", seq)
			return nil
		case <-tick.C:
		}
		if d, err := device(dir); err != nil || d != dev {
			return fmt.Errorf("%s is no longer the volume (device %d, was %d): %v", dir, d, dev, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "seed")); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
		seq++
		line := fmt.Sprintf("%d %s %s\n", seq, time.Now().UTC().Format(time.RFC3339Nano), pod)
		if _, err := j.WriteString(line); err != nil {
			return fmt.Errorf("journal write %d: %w", seq, err)
		}
		if err := j.Sync(); err != nil {
			return fmt.Errorf("journal sync %d: %w", seq, err)
		}
	}
}

// ensureSeed writes 64 KiB of random data and its hash once; later starts
// verify it.
func ensureSeed(dir string) error {
	seed, sum := filepath.Join(dir, "seed"), filepath.Join(dir, "seed.sha256")
	data, err := os.ReadFile(seed)
	if errors.Is(err, fs.ErrNotExist) {
		data = make([]byte, 64<<10)
		if _, err := rand.Read(data); err != nil {
			return err
		}
		h := sha256.Sum256(data)
		if err := writeSynced(seed, data); err != nil {
			return err
		}
		return writeSynced(sum, []byte(hex.EncodeToString(h[:])+"\n"))
	}
	if err != nil {
		return err
	}
	want, err := os.ReadFile(sum)
	if err != nil {
		return err
	}
	h := sha256.Sum256(data)
	if got := hex.EncodeToString(h[:]); got != strings.TrimSpace(string(want)) {
		return fmt.Errorf("seed corrupted: sha256 %s, want %s", got, bytes.TrimSpace(want))
	}
	return nil
}

// lastSeq is the journal's last sequence number. A last line that is not
// whole (no newline, or not a number: the node died, or was fenced, in the
// middle of a write, and the file system kept the size and not the data)
// is cut off, as a database drops a torn last record, so that the next
// line does not follow garbage; a bad line before the last is an error.
func lastSeq(path string) (int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	last, good := 0, 0
	for rest := b; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		line := rest
		if i >= 0 {
			line = rest[:i]
		}
		n, err := strconv.Atoi(strings.Fields(string(line) + " x")[0])
		if err != nil || i < 0 {
			if i >= 0 && bytes.IndexByte(rest[i+1:], '\n') >= 0 {
				return 0, fmt.Errorf("journal line %q: %v", line, err)
			}
			fmt.Printf("dropping the journal's torn last %d bytes %q\n", len(b)-good, truncated(rest, 40))
			if err := os.Truncate(path, int64(good)); err != nil {
				return 0, err
			}
			break
		}
		last, good, rest = n, good+i+1, rest[i+1:]
	}
	return last, nil
}

func truncated(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

func churn(dir, pod string, stop <-chan os.Signal) error {
	if pod == "" {
		pod = "churn"
	}
	name := filepath.Join(dir, pod)
	want := []byte(pod + " " + time.Now().UTC().Format(time.RFC3339Nano) + "\n")
	if err := writeSynced(name, want); err != nil {
		return err
	}
	got, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s reads back %q, wrote %q", name, got, want)
	}
	fmt.Printf("wrote %s\n", name)
	<-stop
	return nil
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func device(path string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, err
	}
	return st.Dev, nil
}

// okMarker is written once put, get or statfs has done its job; the pod's
// readiness probe (workload ok) looks for it.
const okMarker = "/tmp/ok"

func done(stop <-chan os.Signal) error {
	if err := os.WriteFile(okMarker, nil, 0o644); err != nil {
		return err
	}
	<-stop
	return nil
}

func put(path, content string, stop <-chan os.Signal) error {
	if err := writeSynced(path, []byte(content)); err != nil {
		return err
	}
	fmt.Printf("put %s (%d bytes)\n", path, len(content))
	return done(stop)
}

func get(path, content string, stop <-chan os.Signal) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if string(b) != content {
		return fmt.Errorf("%s holds %q, want %q", path, b, content)
	}
	fmt.Printf("got %s (%d bytes)\n", path, len(b))
	return done(stop)
}

func watchSize(dir string, stop <-chan os.Signal) error {
	if err := os.WriteFile(okMarker, nil, 0o644); err != nil {
		return err
	}
	var last uint64
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			return err
		}
		if size := st.Blocks * uint64(st.Bsize); size != last {
			fmt.Printf("size %d\n", size)
			last = size
		}
		select {
		case <-stop:
			return nil
		case <-tick.C:
		}
	}
}
