package registration

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/internal/filelock"
)

// Acquirers in separate processes each allocate generations under
// handover.lock. Every allocation must see the previous one's lease: the
// allocations form one chain of strictly increasing generations.
func TestGenerationMonotonicAcrossProcesses(t *testing.T) {
	n := newTestNode(t)
	const procs, each = 4, 25
	start := filepath.Join(n.pluginDir, "..", "start")
	var helpers []*helper
	for range procs {
		helpers = append(helpers, startHelper(t, "allocate", n, "REG_COUNT="+strconv.Itoa(each), "REG_START="+start))
	}
	if err := os.WriteFile(start, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	type alloc struct{ prev, g uint64 }
	var all []alloc
	for i, h := range helpers {
		var mine []uint64
		for l := range h.lines {
			var a alloc
			if _, err := fmt.Sscanf(l, "%d %d", &a.prev, &a.g); err != nil {
				t.Fatalf("helper %d: %q: %v", i, l, err)
			}
			all = append(all, a)
			mine = append(mine, a.g)
		}
		if err := <-h.exited; err != nil {
			t.Fatalf("helper %d: %v", i, err)
		}
		h.exited <- nil
		if !slices.IsSorted(mine) {
			t.Errorf("helper %d saw generations go back: %v", i, mine)
		}
	}
	if len(all) != procs*each {
		t.Fatalf("got %d allocations, want %d", len(all), procs*each)
	}
	slices.SortFunc(all, func(a, b alloc) int { return compareUint(a.g, b.g) })
	for i, a := range all {
		if i == 0 {
			if a.prev != 0 {
				t.Errorf("first allocation saw a lease with generation %d on a fresh node", a.prev)
			}
			continue
		}
		if a.g <= all[i-1].g {
			t.Fatalf("generation %d allocated twice", a.g)
		}
		if a.prev != all[i-1].g {
			t.Fatalf("allocation of %d read lease generation %d, want the previous allocation %d: not serialized", a.g, a.prev, all[i-1].g)
		}
	}
	if got := n.lease(t).Generation; got != all[len(all)-1].g {
		t.Errorf("lease generation %d, want the last allocated %d", got, all[len(all)-1].g)
	}
}

func TestNextGeneration(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ms := uint64(now.UnixMilli())
	for _, tc := range []struct {
		name   string
		prev   *Lease
		onDisk uint64
		floor  uint64
		want   uint64
	}{
		{"fresh node: the clock", nil, 0, 0, ms},
		{"clock ahead of the lease", &Lease{Generation: 5}, 9, 0, ms},
		{"clock stepped back below the lease", &Lease{Generation: ms + 100}, 0, 0, ms + 101},
		{"a file names a higher generation than the lease", &Lease{Generation: ms + 100}, ms + 500, 0, ms + 501},
		{"lease wiped, files remain", nil, ms + 7, 0, ms + 8},
		{"jump above a version kubelet named", &Lease{Generation: 3}, 0, ms + 1000, ms + 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextGeneration(tc.prev, tc.onDisk, now, tc.floor); got != tc.want {
				t.Errorf("nextGeneration = %d, want %d", got, tc.want)
			}
		})
	}
}

// A holder process that is SIGKILLed is seen as dead through its free
// g<G>.alive lock, and its lock file is then garbage.
func TestDeadHolderDetectedThroughFreeLock(t *testing.T) {
	n := newTestNode(t)
	h := startHelper(t, "hold", n)
	g, err := strconv.ParseUint(h.line(t), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	lay := newLayout(testDriver, n.kubeletDir, n.pluginDir, n.regDir, "")
	if held, err := filelock.Locked(lay.alivePath(g)); err != nil || !held {
		t.Fatalf("live holder's lock: held=%v err=%v, want held", held, err)
	}
	st, err := Status(n.pluginDir, n.regDir, testDriver)
	if err != nil {
		t.Fatal(err)
	}
	if !st.HolderAlive || st.Lease == nil || st.Lease.Generation != g {
		t.Fatalf("status before kill: %+v", st)
	}

	h.kill(t)

	if held, err := filelock.Locked(lay.alivePath(g)); err != nil || held {
		t.Fatalf("killed holder's lock: held=%v err=%v, want free", held, err)
	}
	if st, _ = Status(n.pluginDir, n.regDir, testDriver); st.HolderAlive {
		t.Errorf("status says the killed holder is alive: %+v", st)
	}
	lay.withHandoverLock(func() error {
		lay.collectGarbage(g+1, logrus.WithField("test", t.Name()))
		return nil
	})
	if fileExists(lay.alivePath(g)) {
		t.Errorf("garbage collection left the dead generation's %s", aliveName(g))
	}
}

// A holder's re-registration allocates only while the lease still names the
// generation it holds; a start or takeover (holding 0) allocates regardless.
func TestAllocateAsHolder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lease   *Lease // on disk before the allocation; nil: none
		holding uint64
		wantErr error
	}{
		{name: "start without a lease", holding: 0},
		{name: "start over a holder", lease: &Lease{Generation: 100, Phase: PhaseRegistered}, holding: 0},
		{name: "holder re-registers", lease: &Lease{Generation: 100, Phase: PhaseRegistered}, holding: 100},
		{name: "successor took the lease", lease: &Lease{Generation: 101, Phase: PhaseStarting}, holding: 100, wantErr: errNotHolder},
		{name: "lease gone", holding: 100, wantErr: errNotHolder},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNode(t)
			lay := newLayout(testDriver, n.kubeletDir, n.pluginDir, n.regDir, "")
			if tc.lease != nil {
				if err := writeLease(lay.leasePath(), tc.lease); err != nil {
					t.Fatal(err)
				}
			}
			var a *allocation
			err := lay.withHandoverLock(func() error {
				var err error
				a, err = lay.allocateGeneration(func(g uint64) *Lease { return &Lease{Generation: g, Phase: PhaseStarting} }, 0, tc.holding)
				return err
			})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("allocateGeneration: %v, want %v", err, tc.wantErr)
			}
			got, _ := readLease(lay.leasePath())
			if tc.wantErr != nil {
				if (got == nil) != (tc.lease == nil) || got != nil && got.Generation != tc.lease.Generation {
					t.Errorf("refused allocation changed the lease: %+v, want %+v", got, tc.lease)
				}
				if ents, _ := filepath.Glob(filepath.Join(n.pluginDir, "g*.alive")); len(ents) != 0 {
					t.Errorf("refused allocation left %v", ents)
				}
				return
			}
			defer a.alive.Release()
			if got == nil || got.Generation != a.g {
				t.Errorf("lease %+v, want generation %d", got, a.g)
			}
			if tc.lease != nil && a.g <= tc.lease.Generation {
				t.Errorf("allocated %d, not above %d", a.g, tc.lease.Generation)
			}
		})
	}
}

func TestCorruptOrMissingLease(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content string // "" = no lease.json
		corrupt bool
	}{
		{"missing", "", false},
		{"not JSON", "{\x00garbage", true},
		{"truncated", `{"generation": 17, "phase": "regis`, true},
		{"trailing data", `{"generation": 17, "phase": "registered"} {}`, true},
		{"unknown phase", `{"generation": 17, "phase": "dancing"}`, true},
		{"generation zero", `{"generation": 0, "phase": "registered"}`, true},
		{"negative generation", `{"generation": -3, "phase": "registered"}`, true},
		{"valid", `{"generation": 17, "phase": "registered", "holder": {"pod": "p", "pid": 1}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNode(t)
			lay := newLayout(testDriver, n.kubeletDir, n.pluginDir, n.regDir, "")
			if tc.content != "" {
				if err := os.WriteFile(lay.leasePath(), []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := readLease(lay.leasePath())
			if got := errors.Is(err, errCorruptLease); got != tc.corrupt {
				t.Fatalf("readLease error %v, corrupt=%v, want %v", err, got, tc.corrupt)
			}
			if st, err := Status(n.pluginDir, n.regDir, testDriver); err != nil || (st.Lease == nil) == (tc.name == "valid") {
				t.Errorf("status: %+v, %v", st, err)
			}

			// A generation named only by a file on disk, far above the clock:
			// the allocation must still go above it.
			high := uint64(time.Now().UnixMilli()) + 1_000_000
			name, _ := lay.regSocketName(high)
			l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(n.regDir, name), Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()

			var a *allocation
			err = lay.withHandoverLock(func() error {
				var err error
				a, err = lay.allocateGeneration(func(g uint64) *Lease { return &Lease{Generation: g, Phase: PhaseStarting} }, 0, 0)
				return err
			})
			if err != nil {
				t.Fatalf("allocation with a %s lease: %v", tc.name, err)
			}
			defer a.alive.Release()
			if a.g <= high {
				t.Errorf("allocated %d, not above %d named on disk", a.g, high)
			}
			if (a.prevErr != nil) != tc.corrupt {
				t.Errorf("prevErr = %v, want corrupt=%v", a.prevErr, tc.corrupt)
			}
			if got := n.lease(t); got == nil || got.Generation != a.g {
				t.Errorf("lease after allocation: %+v, want generation %d", got, a.g)
			}
		})
	}
}

func TestRegistrationSocketPathLimit(t *testing.T) {
	g := uint64(1_760_000_000_123)
	full := testDriver + "-g1760000000123-reg.sock"
	hashed := hashDriver(testDriver) + "-g1760000000123-reg.sock"
	pad := func(n int) string { return "/" + strings.Repeat("k", n-1) }
	for _, tc := range []struct {
		name       string
		regDir     string // as this process sees it
		kubeletDir string // kubelet dials <kubeletDir>/plugins_registry/<name>
		want       string // "" = error
	}{
		{"default kubelet dir", "/var/lib/kubelet/plugins_registry", "/var/lib/kubelet", full},
		{"through /host", "/host/var/lib/kubelet/plugins_registry", "/var/lib/kubelet", full},
		// 107 bytes exactly, counting the staging dot-name.
		{"full name just fits", pad(107 - len(full) - 2), "/k", full},
		{"full name one byte over: hashed", pad(107 - len(full) - 1), "/k", hashed},
		{"kubelet's path too long: hashed", "/r", pad(107 - len("/plugins_registry/") - len(full) + 1), hashed},
		{"hashed name just fits", pad(107 - len(hashed) - 2), "/k", hashed},
		{"nothing fits", pad(107 - len(hashed) - 1), "/k", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lay := newLayout(testDriver, tc.kubeletDir, "/plugin", tc.regDir, "")
			got, err := lay.regSocketName(g)
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), "107-byte") {
					t.Fatalf("got %q, %v; want a clear path-limit error", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
			if k, gg := lay.parseRegName(got); k != kindGeneration || gg != g {
				t.Errorf("parseRegName(%q) = %v, %d; want the generation back", got, k, gg)
			}
			for _, p := range []string{filepath.Join(tc.regDir, "."+got), filepath.Join(tc.kubeletDir, "plugins_registry", got)} {
				if len(p) > maxSocketPath {
					t.Errorf("%s is %d bytes", p, len(p))
				}
			}
		})
	}
}

// New refuses a configuration whose sockets cannot fit, with a clear error.
func TestNewRejectsPathsOverTheLimit(t *testing.T) {
	long := "/" + strings.Repeat("d", 80)
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"registration dir", Config{KubeletDir: "/var/lib/kubelet", RegistrationDir: long + "/plugins_registry"}, "107-byte"},
		{"kubelet dir", Config{KubeletDir: long, PluginDir: "/plugin", RegistrationDir: "/registration"}, "CSI endpoint (as kubelet sees it)"},
		{"plugin dir", Config{KubeletDir: "/var/lib/kubelet", PluginDir: long + "/" + strings.Repeat("p", 20)}, "CSI endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.DriverName = testDriver
			if cfg.PluginDir == "" {
				cfg.PluginDir = "/plugin"
			}
			cfg.Serve = func(net.Listener) error { return nil }
			_, err := New(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v; want an error mentioning %q", err, tc.want)
			}
		})
	}
}

func TestParseRegName(t *testing.T) {
	lay := newLayout(testDriver, "/var/lib/kubelet", "/plugin", "/registration", "")
	for _, tc := range []struct {
		name string
		kind socketKind
		g    uint64
	}{
		{testDriver + "-g42-reg.sock", kindGeneration, 42},
		{hashDriver(testDriver) + "-g42-reg.sock", kindGeneration, 42},
		{testDriver + "-reg.sock", kindLegacy, 0},
		{testDriver + "-g042-reg.sock", kindForeign, 0},
		{testDriver + "-g-reg.sock", kindForeign, 0},
		{testDriver + "-g1-g2-reg.sock", kindForeign, 0},
		{testDriver + "-g99999999999999999999999-reg.sock", kindForeign, 0},
		{"other.csi.example.com-g42-reg.sock", kindForeign, 0},
		{"other.csi.example.com-reg.sock", kindForeign, 0},
	} {
		if k, g := lay.parseRegName(tc.name); k != tc.kind || g != tc.g {
			t.Errorf("parseRegName(%q) = %v, %d; want %v, %d", tc.name, k, g, tc.kind, tc.g)
		}
	}
	if !lay.mayCarryDriver(testDriver+"-1234-reg.sock") || lay.mayCarryDriver("other-reg.sock") || lay.mayCarryDriver("."+testDriver+"-reg.sock") {
		t.Error("mayCarryDriver")
	}
	if g, ok := lay.generationOfRegFile(retiredPrefix + testDriver + "-g7-reg.sock"); !ok || g != 7 {
		t.Errorf("generation of a retired socket: %d, %v", g, ok)
	}
}

func TestResolveRegistrationDir(t *testing.T) {
	root := t.TempDir()
	host := filepath.Join(root, "host")
	mk := func(p string) {
		if err := os.MkdirAll(p, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	kd := filepath.Join(root, "var", "lib", "kubelet")
	mk(filepath.Join(host, kd, "plugins_registry"))
	if got, want := ResolveRegistrationDir(kd, host, ""), filepath.Join(host, kd, "plugins_registry"); got != want {
		t.Errorf("only under host root: got %s, want %s", got, want)
	}
	if got, want := ResolveRegistrationDir(kd, "", ""), filepath.Join(kd, "plugins_registry"); got != want {
		t.Errorf("no host root: got %s, want %s", got, want)
	}
	mk(filepath.Join(kd, "plugins_registry"))
	if got, want := ResolveRegistrationDir(kd, host, ""), filepath.Join(kd, "plugins_registry"); got != want {
		t.Errorf("mounted directly: got %s, want %s", got, want)
	}
	if got := ResolveRegistrationDir(kd, host, "/registration/"); got != "/registration" {
		t.Errorf("override: got %s", got)
	}
}

func FuzzParseLease(f *testing.F) {
	f.Add([]byte(`{"generation":1760000000123,"holder":{"pod":"ontap-csi-node-x","podUID":"u","pid":1,"startedAt":"2026-01-02T03:04:05Z"},"registrationSocket":"/var/lib/kubelet/plugins_registry/csi.trident.netapp.io-g1760000000123-reg.sock","nodeInfo":{"nodeID":"n1","topology":{"zone":"a"}},"phase":"registered","updatedAt":"2026-01-02T03:04:06Z"}`))
	f.Add([]byte(`{"generation":0,"phase":"uninstalling"}`))
	f.Add([]byte(`{"generation":18446744073709551615,"phase":"starting"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := parseLease(b)
		if err != nil {
			if !errors.Is(err, errCorruptLease) {
				t.Fatalf("error %v does not wrap errCorruptLease", err)
			}
			return
		}
		// What parses must survive our own write and read.
		path := filepath.Join(t.TempDir(), LeaseName)
		if err := writeLease(path, l); err != nil {
			t.Fatal(err)
		}
		back, err := readLease(path)
		if err != nil || back.Generation != l.Generation || back.Phase != l.Phase {
			t.Fatalf("round trip: %+v, %v; want %+v", back, err, l)
		}
	})
}

func FuzzParseRegName(f *testing.F) {
	f.Add(testDriver + "-g1760000000123-reg.sock")
	f.Add(hashDriver(testDriver) + "-g5-reg.sock")
	f.Add(testDriver + "-reg.sock")
	f.Add(retiredPrefix + testDriver + "-g7-reg.sock")
	f.Add("g12.alive")
	lay := newLayout(testDriver, "/var/lib/kubelet", "/plugin", "/var/lib/kubelet/plugins_registry", "")
	f.Fuzz(func(t *testing.T, name string) {
		if k, g := lay.parseRegName(name); k == kindGeneration {
			if g == 0 {
				t.Fatalf("%q: generation 0", name)
			}
			// Exactly one name per generation and form: no aliases.
			want := []string{testDriver + "-g" + strconv.FormatUint(g, 10) + regSuffix, lay.hashPrefix + "-g" + strconv.FormatUint(g, 10) + regSuffix}
			if !slices.Contains(want, name) {
				t.Fatalf("%q parses as generation %d but is not one of %v", name, g, want)
			}
		}
		if g, ok := parseAliveName(name); ok && aliveName(g) != name {
			t.Fatalf("%q parses as alive file of %d", name, g)
		}
		lay.generationOfRegFile(name)
	})
}
