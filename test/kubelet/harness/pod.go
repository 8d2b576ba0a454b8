package harness

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Kubelet's pod lifecycle constants that matter to a node plugin.
const (
	// DefaultGracePeriod is terminationGracePeriodSeconds' default.
	DefaultGracePeriod = 30 * time.Second
	// crashLoopInitial and crashLoopMax are kubelet's container restart
	// back-off (restartPolicy: Always, as in a DaemonSet).
	crashLoopInitial = 10 * time.Second
	crashLoopMax     = 5 * time.Minute
)

// ContainerSpec is one container of a pod: a program run with argv, never
// through a shell.
type ContainerSpec struct {
	Name string
	Path string
	Args []string
	Env  []string // added to the harness's environment
}

// Pod runs containers as processes, the way kubelet runs a DaemonSet pod on
// a node: all containers start together, one that exits on its own is
// restarted with crash-loop back-off, and deleting the pod sends SIGTERM to
// every container and SIGKILL to those still running after the grace period.
type Pod struct {
	Name    string
	UID     string
	Started time.Time // when the pod's containers were started

	tl     *Timeline
	logDir string

	mu          sync.Mutex
	containers  []*container
	terminating bool
	done        chan struct{} // closed once terminating and all containers exited
	doneOnce    sync.Once
}

type container struct {
	spec      ContainerSpec
	cmd       *exec.Cmd
	running   bool
	exited    chan struct{} // of the current run
	startedAt time.Time
	restarts  int
	// crashes are exits while the pod was not being deleted.
	crashes []string
}

// StartPod starts a pod with the given containers.
func StartPod(tl *Timeline, logDir, name string, specs ...ContainerSpec) (*Pod, error) {
	p := &Pod{Name: name, UID: newUID(), Started: time.Now(), tl: tl, logDir: logDir, done: make(chan struct{})}
	for _, s := range specs {
		p.containers = append(p.containers, &container{spec: s})
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.containers {
		if err := p.startLocked(c); err != nil {
			for _, c := range p.containers {
				if c.running {
					_ = c.cmd.Process.Kill()
				}
			}
			return nil, err
		}
	}
	return p, nil
}

func (p *Pod) startLocked(c *container) error {
	logf, err := os.OpenFile(filepath.Join(p.logDir, p.Name+"-"+c.spec.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.spec.Path, c.spec.Args...)
	cmd.Env = append(podEnv(), c.spec.Env...)
	cmd.Env = append(cmd.Env, "POD_NAME="+p.Name, "POD_UID="+p.UID)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The process must not outlive the harness, even if the harness is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c.startedAt = time.Now()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting %s/%s: %w", p.Name, c.spec.Name, err)
	}
	c.cmd, c.running, c.exited = cmd, true, make(chan struct{})
	p.tl.AddAt(c.startedAt, KindProc, "%s/%s started, pid %d", p.Name, c.spec.Name, cmd.Process.Pid)
	go p.reap(c, cmd, c.exited, logf)
	return nil
}

// podEnv is the harness's environment without the in-cluster API address:
// the processes under test have no API server, as kubelet's fake clientset
// is in this process.
func podEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "KUBERNETES_SERVICE_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func (p *Pod) reap(c *container, cmd *exec.Cmd, exited chan struct{}, logf *os.File) {
	err := cmd.Wait()
	logf.Close()
	at := time.Now()
	p.mu.Lock()
	c.running = false
	close(exited)
	p.tl.AddAt(at, KindProc, "%s/%s pid %d exited: %s", p.Name, c.spec.Name, cmd.Process.Pid, exitText(err))
	if !p.terminating {
		c.crashes = append(c.crashes, fmt.Sprintf("pid %d %s at %+.3fs", cmd.Process.Pid, exitText(err), at.Sub(p.tl.Start()).Seconds()))
		delay := crashLoopInitial << min(c.restarts, 5)
		delay = min(delay, crashLoopMax)
		c.restarts++
		time.AfterFunc(delay, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.terminating {
				return
			}
			if err := p.startLocked(c); err != nil {
				p.tl.Add(KindProc, "%s/%s restart failed: %v", p.Name, c.spec.Name, err)
			}
		})
	}
	p.checkDoneLocked()
	p.mu.Unlock()
}

func (p *Pod) checkDoneLocked() {
	if !p.terminating {
		return
	}
	for _, c := range p.containers {
		if c.running {
			return
		}
	}
	p.doneOnce.Do(func() { close(p.done) })
}

func exitText(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "terminated by signal " + ws.Signal().String()
		}
		return fmt.Sprintf("exit %d", ee.ExitCode())
	}
	if err != nil {
		return err.Error()
	}
	return "exit 0"
}

// Delete deletes the pod as kubelet does: SIGTERM to every container now,
// SIGKILL to what still runs after grace. It does not wait; see Wait.
func (p *Pod) Delete(grace time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.terminating {
		return
	}
	p.terminating = true
	p.tl.Add(KindProc, "%s deleted: SIGTERM to all containers (grace %v)", p.Name, grace)
	for _, c := range p.containers {
		if c.running {
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	p.checkDoneLocked()
	time.AfterFunc(grace, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.containers {
			if c.running {
				p.tl.Add(KindProc, "%s/%s: grace period over, SIGKILL", p.Name, c.spec.Name)
				_ = c.cmd.Process.Kill()
			}
		}
	})
}

// Kill SIGKILLs every container and does not restart them, as when the node
// loses the pod abruptly.
func (p *Pod) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.terminating = true
	p.tl.Add(KindProc, "%s: SIGKILL to all containers", p.Name)
	for _, c := range p.containers {
		if c.running {
			_ = c.cmd.Process.Kill()
		}
	}
	p.checkDoneLocked()
}

// Wait waits up to timeout for a deleted or killed pod's containers to exit.
func (p *Pod) Wait(timeout time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Done is closed when a deleted pod's containers have all exited.
func (p *Pod) Done() <-chan struct{} { return p.done }

func (p *Pod) container(name string) *container {
	for _, c := range p.containers {
		if c.spec.Name == name {
			return c
		}
	}
	return nil
}

// PID returns the current process id of container name, 0 if not running.
func (p *Pod) PID(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.container(name); c != nil && c.running {
		return c.cmd.Process.Pid
	}
	return 0
}

// Running reports whether container name runs.
func (p *Pod) Running(name string) bool { return p.PID(name) != 0 }

// StartedAt is when container name's current or last run was started.
func (p *Pod) StartedAt(name string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.container(name); c != nil {
		return c.startedAt
	}
	return time.Time{}
}

// Crashes lists the exits of container name that happened while the pod
// was not being deleted.
func (p *Pod) Crashes(name string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.container(name); c != nil {
		return append([]string(nil), c.crashes...)
	}
	return nil
}

func newUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
