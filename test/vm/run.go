package vm

import (
	"bufio"
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

//go:embed init.sh
var initScript []byte

// Options describe one VM run.
type Options struct {
	// Files are put in the VM's /host/in (read-only): name there -> host
	// path. Binaries must be static (CGO_ENABLED=0).
	Files map[string]string
	// Command is run by the VM's init once its daemons are up, as argv
	// (no shell), in /tmp, with stdout and stderr in Result.Output. It may
	// write files to $ONTAP_CSI_VM_OUT (Result.OutDir). It is a shorthand
	// for one step.
	Command []string
	// Steps are run one after the other in the same boot, each as Command
	// is, whether the previous one failed or not; their results are in
	// Result.Steps. Booting takes long under TCG: a run of several suites
	// pays for it once.
	Steps []Step
	// Env are "NAME=value" pairs set for every step.
	Env []string
	// Timeout bounds the whole run, boot included; default 15 minutes.
	Timeout time.Duration
}

// Step is one command of a run.
type Step struct {
	Name    string // [a-z0-9-]+
	Command []string
	Env     []string // "NAME=value", after Options.Env
}

// Result is what a VM run gave back.
type Result struct {
	ExitCode int           // the first failed step's, else 0
	Output   string        // the first step's stdout and stderr (Command)
	OutDir   string        // the first step's output directory
	Steps    []StepResult  // in order
	Console  string        // the serial console and the init's log
	Boot     time.Duration // from starting qemu to the daemons being up
	Elapsed  time.Duration // the whole run
}

// StepResult is what one step gave back. A step the VM never got to (it
// was killed, or an earlier step hung) has Ran false.
type StepResult struct {
	Name     string
	Ran      bool
	ExitCode int
	Output   string
	OutDir   string // its files; removed when the test ends
	Elapsed  time.Duration
	CPU      GuestCPU
}

// GuestCPU is what the guest's CPUs did during a step (init.sh's "cpu"
// file): whether the step waited or the emulated CPUs held it up.
type GuestCPU struct {
	Busy  time.Duration // all CPUs' busy time
	Total time.Duration // all CPUs' accounted time: at most Elapsed times their number (TCG loses ticks)
	Step  time.Duration // of Busy, the step's own processes
}

// String is "62% busy (step 90s, daemons and kernel 40s)", or "" when the
// step left no figures.
func (c GuestCPU) String() string {
	if c.Total <= 0 {
		return ""
	}
	return fmt.Sprintf("%d%% busy (step %s, daemons and kernel %s)", 100*c.Busy/c.Total,
		c.Step.Round(time.Second), (c.Busy - c.Step).Round(time.Second))
}

// Available fails the test unless the VM can run here: root (9p shares of
// root-owned files, debootstrap), qemu, qemu-img and debootstrap. The VM
// tests run only with ONTAP_CSI_VM=1 (make vm); without it they skip, so
// that `go test ./...` does not boot VMs.
func Available(t testing.TB) {
	t.Helper()
	if os.Getenv("ONTAP_CSI_VM") == "" {
		t.Skip("VM tests run with ONTAP_CSI_VM=1 (make vm)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the VM tests need root (debootstrap, 9p shares)")
	}
	for _, tool := range []string{"qemu-system-x86_64", "qemu-img", "debootstrap", "mkfs.ext4"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing (.ci/run installs qemu-system-x86, qemu-utils, debootstrap, cpio)", tool)
		}
	}
}

// Run boots the cached image (building it first if needed), runs
// o.Command in it and returns once the VM has powered off. The VM is
// killed when the test ends, fails, times out, or the test process gets
// SIGINT or SIGTERM (and, through Pdeathsig, when it dies of anything
// else); its overlay and shares are removed. A run whose init or command
// could not report an exit code fails the test.
func Run(t testing.TB, o Options) *Result {
	t.Helper()
	Available(t)
	img := CachedImage(t)
	m := start(t, img, o)
	res, err := m.wait()
	if err != nil {
		m.saveLogs(t)
		t.Fatalf("VM: %v\nconsole (tail):\n%s", err, tail(m.console(), 6000))
	}
	return res
}

// machine is one running VM.
type machine struct {
	dir     string // temporary: in/ and out/
	steps   []Step
	overlay []*os.File // the overlay, read-write and read-only, unlinked
	cmd     *exec.Cmd
	started time.Time
	timeout time.Duration

	mu      sync.Mutex
	con     bytes.Buffer
	ready   time.Time
	done    chan struct{} // qemu was reaped
	waitErr error
	killed  bool
}

var live struct {
	sync.Mutex
	machines map[*machine]bool
	handler  bool
}

const tempPrefix = "ontap-csi-vm-"

func start(t testing.TB, img *Image, o Options) *machine {
	t.Helper()
	sweepStale()
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", tempPrefix, os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	m := &machine{dir: dir, done: make(chan struct{}), timeout: o.Timeout}
	if m.timeout == 0 {
		m.timeout = 15 * time.Minute
	}
	t.Cleanup(func() {
		m.kill()
		for _, f := range m.overlay {
			f.Close() // if qemu never started
		}
		if t.Failed() || slices.Contains(o.Env, "ONTAP_CSI_VM_TRACE=1") {
			m.saveLogs(t)
		}
		os.RemoveAll(dir)
	})
	if err := m.prepare(img, o); err != nil {
		t.Fatal(err)
	}
	m.cmd = exec.Command("qemu-system-x86_64", m.args(img)...)
	m.cmd.Dir = dir
	m.cmd.ExtraFiles = m.overlay // fds 3 and 4: /dev/fdset/1
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	m.cmd.Stderr = m.cmd.Stdout
	// A process group of its own, killed as a whole; and SIGKILL when the
	// test process dies, however it dies.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	register(m)
	runtime.LockOSThread() // Pdeathsig fires when the forking thread exits
	m.started = time.Now()
	err = m.cmd.Start()
	runtime.UnlockOSThread()
	if err != nil {
		unregister(m)
		t.Fatalf("qemu: %v", err)
	}
	for _, f := range m.overlay {
		f.Close() // qemu has them now
	}
	go m.readConsole(stdout)
	go m.reap()
	if onStart != nil {
		onStart(m.cmd.Process.Pid, dir)
	}
	return m
}

// onStart, when set (by a test), is told each qemu's pid and directory.
var onStart func(pid int, dir string)

// prepare fills the shares and makes the overlay over the cached image.
func (m *machine) prepare(img *Image, o Options) error {
	in, out := filepath.Join(m.dir, "in"), filepath.Join(m.dir, "out")
	for _, d := range []string{in, out} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	m.steps = o.Steps
	if len(o.Command) > 0 {
		m.steps = append([]Step{{Name: "command", Command: o.Command}}, m.steps...)
	}
	if len(m.steps) == 0 {
		return errors.New("vm.Options: no Command and no Steps")
	}
	files := map[string][]byte{
		"init.sh": initScript,
		"env":     []byte(strings.Join(o.Env, "\x00")),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(in, name), data, 0o755); err != nil {
			return err
		}
	}
	if err := writeSteps(in, m.steps); err != nil {
		return err
	}
	for name, src := range o.Files {
		if name != filepath.Base(name) || files[name] != nil {
			return fmt.Errorf("vm.Options.Files: bad name %q", name)
		}
		if err := linkOrCopy(src, filepath.Join(in, name)); err != nil {
			return err
		}
	}
	return m.makeOverlay(img)
}

var stepName = regexp.MustCompile(`^[a-z0-9-]+$`)

// writeSteps lays out the steps for init.sh: steps/NN-name/{argv,env}.
func writeSteps(in string, steps []Step) error {
	seen := map[string]bool{}
	for i, st := range steps {
		if !stepName.MatchString(st.Name) || seen[st.Name] || len(st.Command) == 0 {
			return fmt.Errorf("vm.Options: bad step %d %q", i, st.Name)
		}
		seen[st.Name] = true
		dir := filepath.Join(in, "steps", stepDir(i, st))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for name, data := range map[string]string{"argv": strings.Join(st.Command, "\x00"), "env": strings.Join(st.Env, "\x00")} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

func stepDir(i int, st Step) string { return fmt.Sprintf("%02d-%s", i, st.Name) }

// makeOverlay makes the qcow2 overlay over the cached image, opens it
// read-write and read-only for qemu (-add-fd: qemu reopens images while it
// starts, and picks the descriptor by access mode) and unlinks it: no
// temporary image outlives qemu, even if the test process is killed.
func (m *machine) makeOverlay(img *Image) error {
	path := filepath.Join(m.dir, "overlay.qcow2")
	defer os.Remove(path)
	out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", img.Disk, path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("qemu-img create: %v: %s", err, out)
	}
	for _, flag := range []int{os.O_RDWR, os.O_RDONLY} {
		f, err := os.OpenFile(path, flag, 0)
		if err != nil {
			return err
		}
		m.overlay = append(m.overlay, f)
	}
	return nil
}

func (m *machine) args(img *Image) []string {
	return []string{
		"-accel", "tcg,thread=multi", "-cpu", "max", "-smp", "2", "-m", "2048",
		"-nographic", "-monitor", "none", "-no-reboot", "-nic", "none",
		"-kernel", img.Kernel, "-initrd", img.Initrd,
		"-append", "console=ttyS0 root=/dev/vda rw init=/sbin/ontap-csi-vm-init quiet panic=-1 mitigations=off",
		"-add-fd", "fd=3,set=1", "-add-fd", "fd=4,set=1",
		"-drive", "file=/dev/fdset/1,format=qcow2,if=virtio,cache=unsafe",
		"-virtfs", "local,path=in,mount_tag=in,security_model=none,readonly=on,id=in",
		"-virtfs", "local,path=out,mount_tag=out,security_model=none,id=out",
	}
}

func (m *machine) readConsole(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		m.mu.Lock()
		m.con.WriteString(line)
		m.con.WriteByte('\n')
		if strings.Contains(line, "ontap-csi-vm: ready") && m.ready.IsZero() {
			m.ready = time.Now()
		}
		m.mu.Unlock()
	}
}

func (m *machine) reap() {
	err := m.cmd.Wait()
	m.mu.Lock()
	m.waitErr = err
	m.mu.Unlock()
	close(m.done)
	unregister(m)
}

// wait waits for the VM to power off, or kills it at the timeout.
func (m *machine) wait() (*Result, error) {
	timer := time.NewTimer(m.timeout)
	defer timer.Stop()
	select {
	case <-m.done:
	case <-timer.C:
		m.kill()
		return nil, fmt.Errorf("timed out after %s; killed", m.timeout)
	}
	res := &Result{Elapsed: time.Since(m.started), Console: m.console()}
	m.mu.Lock()
	if !m.ready.IsZero() {
		res.Boot = m.ready.Sub(m.started)
	}
	waitErr := m.waitErr
	m.mu.Unlock()
	out := filepath.Join(m.dir, "out")
	for i, st := range m.steps {
		res.Steps = append(res.Steps, readStep(filepath.Join(out, "steps", stepDir(i, st)), st.Name))
	}
	res.Output, res.OutDir = res.Steps[0].Output, res.Steps[0].OutDir
	code, err := os.ReadFile(filepath.Join(out, "exit-code"))
	if err != nil {
		return res, fmt.Errorf("no exit code from the VM (qemu: %v)", waitErr)
	}
	if res.ExitCode, err = strconv.Atoi(strings.TrimSpace(string(code))); err != nil {
		return res, fmt.Errorf("exit code %q", code)
	}
	return res, nil
}

// readStep reads a step's output and result ("rc start end", written by
// init.sh when the step ended).
func readStep(dir, name string) StepResult {
	r := StepResult{Name: name, OutDir: dir, ExitCode: -1}
	out, _ := os.ReadFile(filepath.Join(dir, "output.log"))
	r.Output = string(out)
	b, err := os.ReadFile(filepath.Join(dir, "result"))
	if err != nil {
		return r
	}
	var start, end float64
	if n, _ := fmt.Sscanf(string(b), "%d %f %f", &r.ExitCode, &start, &end); n == 3 {
		r.Ran = true
		r.Elapsed = time.Duration((end - start) * float64(time.Second))
	}
	r.CPU = readGuestCPU(filepath.Join(dir, "cpu"))
	return r
}

// readGuestCPU reads a step's "cpu" file: init.sh's clock ticks (busy,
// total, the step's processes) before and after it.
func readGuestCPU(file string) GuestCPU {
	b, err := os.ReadFile(file)
	if err != nil {
		return GuestCPU{}
	}
	var t [6]int64
	if n, _ := fmt.Sscanf(string(b), "%d %d %d %d %d %d", &t[0], &t[1], &t[2], &t[3], &t[4], &t[5]); n != 6 {
		return GuestCPU{}
	}
	// USER_HZ is 100 on Linux/amd64.
	tick := func(d int64) time.Duration { return time.Duration(d) * 10 * time.Millisecond }
	return GuestCPU{Busy: tick(t[3] - t[0]), Total: tick(t[4] - t[1]), Step: tick(t[5] - t[2])}
}

// console is the serial console so far, then the init's own log.
func (m *machine) console() string {
	m.mu.Lock()
	s := m.con.String()
	m.mu.Unlock()
	for _, f := range []string{"init.log", "dmesg.log"} {
		if b, err := os.ReadFile(filepath.Join(m.dir, "out", f)); err == nil {
			s += "\n--- " + f + " ---\n" + string(b)
		}
	}
	return s
}

// kill ends qemu's whole process group and waits until it is reaped.
func (m *machine) kill() {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	select {
	case <-m.done:
		return
	default:
	}
	m.mu.Lock()
	m.killed = true
	m.mu.Unlock()
	_ = unix.Kill(-m.cmd.Process.Pid, unix.SIGKILL)
	<-m.done
}

// saveLogs keeps the console, init log and the steps' outputs of a failed
// run in $TMPDIR/ontap-csi-vm-logs/<test>-<time>/ (the temporary directory
// itself goes).
func (m *machine) saveLogs(t testing.TB) {
	if terminating.Load() {
		return
	}
	dst := filepath.Join(os.TempDir(), "ontap-csi-vm-logs", strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())+"-"+time.Now().Format("20060102-150405"))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return
	}
	_ = os.WriteFile(filepath.Join(dst, "console.log"), []byte(m.console()), 0o644)
	// Each step's output, dmesg and the logs its tests wrote.
	_ = os.CopyFS(filepath.Join(dst, "steps"), os.DirFS(filepath.Join(m.dir, "out", "steps")))
	t.Logf("VM logs saved in %s", dst)
}

func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// register tracks a running VM for the signal handler, installed once:
// SIGINT or SIGTERM of the test process kills every VM and removes its
// directory before the process dies of the signal as it would have.
func register(m *machine) {
	live.Lock()
	defer live.Unlock()
	if live.machines == nil {
		live.machines = map[*machine]bool{}
	}
	live.machines[m] = true
	if !live.handler {
		live.handler = true
		installSignalHandler()
	}
}

func unregister(m *machine) {
	live.Lock()
	delete(live.machines, m)
	live.Unlock()
}

func killAll() {
	live.Lock()
	ms := make([]*machine, 0, len(live.machines))
	for m := range live.machines {
		ms = append(ms, m)
	}
	live.Unlock()
	for _, m := range ms {
		m.kill()
		os.RemoveAll(m.dir)
	}
}

// sweepStale removes the directories of VM runs whose test process died
// without its cleanup (SIGKILL): their qemu died with it (Pdeathsig) and
// their overlay was already unlinked, but the shares stay.
func sweepStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	for _, d := range dirs {
		rest := strings.TrimPrefix(filepath.Base(d), tempPrefix)
		pidStr, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || pid <= 0 {
			continue
		}
		if unix.Kill(pid, 0) == unix.ESRCH {
			os.RemoveAll(d)
		}
	}
}
