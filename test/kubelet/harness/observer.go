package harness

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// Sampling periods. The design asks for at least one sample every 10 ms;
// the registration and CSINode probes are cheap enough to run twice as
// often, the kubelet call dials a socket and is run every 10 ms.
const (
	StatePeriod = 5 * time.Millisecond
	CallPeriod  = 10 * time.Millisecond
	callTimeout = 2 * time.Second
)

// Observer samples what kubelet sees of the driver and what lies on disk,
// into a Timeline.
type Observer struct {
	k         Kubelet
	tl        *Timeline
	regDir    string
	pluginDir string

	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	leases []Lease // every distinct lease read, in order
}

// NewObserver prepares an observer of k for the kubelet root dir root.
func NewObserver(k Kubelet, tl *Timeline, root string) *Observer {
	return &Observer{
		k:         k,
		tl:        tl,
		regDir:    filepath.Join(root, "plugins_registry"),
		pluginDir: filepath.Join(root, "plugins", Driver),
	}
}

// Start begins sampling. The kubelet root's plugins_registry and plugin dir
// must exist.
func (o *Observer) Start() error {
	ctx, cancel := context.WithCancel(context.Background())
	o.cancel = cancel
	if err := o.watchFiles(ctx); err != nil {
		cancel()
		return err
	}
	o.wg.Add(2)
	go o.every(ctx, StatePeriod, o.sampleState)
	go o.every(ctx, CallPeriod, o.sampleCall)
	return nil
}

// Stop ends sampling and waits for the samplers.
func (o *Observer) Stop() {
	if o.cancel != nil {
		o.cancel()
		o.wg.Wait()
	}
}

func (o *Observer) every(ctx context.Context, period time.Duration, sample func(context.Context)) {
	defer o.wg.Done()
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (o *Observer) sampleState(ctx context.Context) {
	at := time.Now()
	o.tl.Sample(SigRegistered, at, o.k.Registered("1.0.0"), "")
	ok, err := o.k.CSINodeHasDriver(ctx)
	detail := ""
	if err != nil {
		detail = err.Error()
	}
	o.tl.Sample(SigCSINode, at, ok, detail)
}

func (o *Observer) sampleCall(ctx context.Context) {
	at := time.Now()
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	r := o.k.Call(cctx)
	if ctx.Err() != nil {
		return
	}
	detail := ""
	if r.Outcome != Served {
		detail = r.Outcome.String() + ": " + shorten(r.Err)
	}
	o.tl.Sample(SigServed, at, r.Outcome == Served, detail)
}

// watchFiles records every change in plugins_registry and the plugin dir as
// inotify reports it, so that a socket that lives for a millisecond (a
// legacy socket retired at once) shows too, and reads the lease whenever it
// is replaced or written.
func (o *Observer) watchFiles(ctx context.Context) error {
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("inotify: %w", err)
	}
	// A pollable *os.File: Close wakes a blocked Read.
	f := os.NewFile(uintptr(fd), "inotify")
	dirs := map[int32]string{}
	const mask = syscall.IN_CREATE | syscall.IN_DELETE | syscall.IN_MOVED_FROM | syscall.IN_MOVED_TO | syscall.IN_CLOSE_WRITE
	for _, d := range []string{o.regDir, o.pluginDir} {
		wd, err := syscall.InotifyAddWatch(fd, d, mask)
		if err != nil {
			f.Close()
			return fmt.Errorf("inotify watch %s: %w", d, err)
		}
		dirs[int32(wd)] = filepath.Base(d)
	}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		<-ctx.Done()
		f.Close()
	}()
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		o.readEvents(f, dirs)
	}()
	o.readLease(time.Now())
	return nil
}

func (o *Observer) readEvents(f *os.File, dirs map[int32]string) {
	buf := make([]byte, 64*1024)
	movedFrom := map[uint32]string{} // rename cookie -> old name
	for {
		n, err := f.Read(buf)
		if err != nil {
			return
		}
		at := time.Now()
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameBytes := buf[off+syscall.SizeofInotifyEvent : off+syscall.SizeofInotifyEvent+int(ev.Len)]
			off += syscall.SizeofInotifyEvent + int(ev.Len)
			name := strings.TrimRight(string(nameBytes), "\x00")
			path := filepath.Join(dirs[ev.Wd], name)
			switch {
			case ev.Mask&syscall.IN_MOVED_FROM != 0:
				movedFrom[ev.Cookie] = path
			case ev.Mask&syscall.IN_MOVED_TO != 0:
				if old, ok := movedFrom[ev.Cookie]; ok {
					delete(movedFrom, ev.Cookie)
					o.tl.AddAt(at, KindFS, "mv %s -> %s", old, path)
				} else {
					o.tl.AddAt(at, KindFS, "+ %s (moved in)", path)
				}
			case ev.Mask&syscall.IN_CREATE != 0:
				o.tl.AddAt(at, KindFS, "+ %s", path)
			case ev.Mask&syscall.IN_DELETE != 0:
				o.tl.AddAt(at, KindFS, "- %s", path)
			}
			if name == LeaseFile && ev.Mask&(syscall.IN_MOVED_TO|syscall.IN_CLOSE_WRITE|syscall.IN_CREATE) != 0 {
				o.readLease(at)
			}
		}
		for cookie, old := range movedFrom {
			// Renamed out of the watched directories.
			o.tl.AddAt(at, KindFS, "mv %s -> (elsewhere)", old)
			delete(movedFrom, cookie)
		}
	}
}

func (o *Observer) readLease(at time.Time) {
	l, err := ReadLease(o.pluginDir)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		o.tl.AddAt(at, KindLease, "unreadable: %v", err)
		return
	}
	o.mu.Lock()
	changed := len(o.leases) == 0 || l != o.leases[len(o.leases)-1]
	if changed {
		o.leases = append(o.leases, l)
	}
	o.mu.Unlock()
	if changed {
		o.tl.AddAt(at, KindLease, "%s", l)
	}
}

// Lease returns the last lease read.
func (o *Observer) Lease() Lease {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.leases) == 0 {
		return Lease{}
	}
	return o.leases[len(o.leases)-1]
}

// Leases returns every distinct lease read, in order.
func (o *Observer) Leases() []Lease {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Lease(nil), o.leases...)
}

// DirNames lists dir's entries, sorted.
func DirNames(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name()) // ReadDir sorts by name
	}
	return names
}

func shorten(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 160 {
		return s[:160] + "..."
	}
	return s
}

// Inode returns the inode number of path, 0 if it does not exist.
func Inode(path string) uint64 {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0
	}
	return st.Ino
}
