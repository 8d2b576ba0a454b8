package localcluster

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is a daemon running inside the node's namespaces, its output
// appended to a log file (a restart appends to the same file).
type Process struct {
	Name string
	Log  string
	argv []string
	env  []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// start runs argv inside the mount and network namespaces of nsPID.
// nsenter execs argv in place, so the PID is the daemon's. Each daemon gets
// a process group of its own: a Ctrl-C meant for `go test` must not reach
// the cluster, whose teardown stops it in order.
func (p *Process) start(nsPID int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	logf, err := os.OpenFile(p.Log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "==== %s start: %s\n", time.Now().UTC().Format(time.RFC3339Nano), strings.Join(p.argv, " "))
	args := append([]string{"--target", strconv.Itoa(nsPID), "--mount", "--net", "--"}, p.argv...)
	cmd := exec.Command("nsenter", args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	logf.Close()
	p.cmd, p.done, p.err = cmd, make(chan struct{}), nil
	done := p.done
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// PID is the process ID of the running daemon.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// Exited reports whether the process has exited, and how.
func (p *Process) Exited() (bool, error) {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.err
	default:
		return false, nil
	}
}

// Stop sends sig and waits up to grace before SIGKILL.
func (p *Process) Stop(sig syscall.Signal, grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
		return
	case <-time.After(grace):
	}
	_ = cmd.Process.Kill()
	<-done
}

// nodeNS is the running nodens process that owns the node's namespaces.
type nodeNS struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	pid    int
	// sysctls the kubelet may change, as they were before it ran.
	sysctls map[string]string
}

// nodeNSReady and NodeNSReport mirror cmd/nodens's JSON lines.
type nodeNSReady struct {
	PID     int               `json:"pid"`
	Sysctls map[string]string `json:"sysctls"`
}

// NodeNSReport is what the namespace holder undid at teardown.
type NodeNSReport struct {
	Killed          []string          `json:"killed,omitempty"`
	Unmounted       int               `json:"unmounted"`
	MountsLeft      []string          `json:"mountsLeft,omitempty"`
	CgroupsRemoved  int               `json:"cgroupsRemoved"`
	CgroupsLeft     []string          `json:"cgroupsLeft,omitempty"`
	SysctlsRestored map[string]string `json:"sysctlsRestored,omitempty"`
	Errors          []string          `json:"errors,omitempty"`
}

// startNodeNS starts nodens in new mount and network namespaces and waits
// for its ready line.
func startNodeNS(bin, logPath string, args []string) (*nodeNS, error) {
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWNET,
		Setpgid:    true,
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stderr = logf
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start nodens: %w", err)
	}
	n := &nodeNS{cmd: cmd, stdin: stdin, stdout: bufio.NewReader(out)}
	line, err := n.stdout.ReadBytes('\n')
	if err != nil {
		_ = cmd.Wait()
		b, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("nodens exited during setup: %v: %s", err, b)
	}
	var ready nodeNSReady
	if err := json.Unmarshal(line, &ready); err != nil || ready.PID == 0 {
		// A failed setup prints its report instead.
		_ = cmd.Wait()
		return nil, fmt.Errorf("nodens setup failed: %s", strings.TrimSpace(string(line)))
	}
	n.pid, n.sysctls = ready.PID, ready.Sysctls
	return n, nil
}

// teardown makes nodens sweep the namespaces and waits for it to exit.
func (n *nodeNS) teardown(timeout time.Duration) (NodeNSReport, error) {
	var rep NodeNSReport
	_, _ = io.WriteString(n.stdin, "teardown\n")
	type result struct {
		line []byte
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		line, err := n.stdout.ReadBytes('\n')
		ch <- result{line, err}
	}()
	select {
	case r := <-ch:
		_ = n.stdin.Close()
		_ = n.cmd.Wait()
		if r.err != nil {
			return rep, fmt.Errorf("nodens teardown: %w", r.err)
		}
		if err := json.Unmarshal(r.line, &rep); err != nil {
			return rep, fmt.Errorf("nodens teardown report %q: %w", r.line, err)
		}
		return rep, nil
	case <-time.After(timeout):
		_ = n.cmd.Process.Kill()
		_ = n.cmd.Wait()
		return rep, errors.New("nodens teardown timed out; killed it")
	}
}
