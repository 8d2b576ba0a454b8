// Package hostexec runs host tools (mount, mkfs, iscsiadm, multipath, ...) by
// name, never through a shell.
//
// In a container the tools are the host's: with a host root set, each command
// runs chrooted into it, as Trident's chwrap does, so the node plugin always
// uses the host's binaries, configuration (/etc/iscsi, /etc/multipath.conf)
// and kernel modules rather than copies shipped in the image. Without a host
// root the tools are looked up in PATH, which is how the tests put the shims
// of test/shims in front of the real tools.
package hostexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
)

// Executor runs a host tool. It is the seam at which tests substitute tools.
type Executor interface {
	// Run runs name with args and returns its standard output. A non-zero
	// exit is an *ExitError carrying the exit code and standard error.
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// ExitError is a tool that ran and failed.
type ExitError struct {
	Name   string
	Args   []string
	Code   int
	Stderr string
}

func (e *ExitError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = "no output"
	}
	return fmt.Sprintf("%s exited with status %d: %s", e.Name, e.Code, msg)
}

// ExitCode returns the exit status of a tool that ran and failed, or -1.
func ExitCode(err error) int {
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return -1
}

type sensitiveKey struct{}

// WithSensitiveArgs marks ctx so that Run never logs or returns the
// arguments of the commands it runs with it: some tools take secrets only in
// argv (iscsiadm -o update -n node.session.auth.password -v <secret>).
func WithSensitiveArgs(ctx context.Context) context.Context {
	return context.WithValue(ctx, sensitiveKey{}, true)
}

func sensitive(ctx context.Context) bool {
	s, _ := ctx.Value(sensitiveKey{}).(bool)
	return s
}

// Host runs tools on the host, chrooted into Root when it is set.
type Host struct {
	// Root is where the host's root filesystem is mounted ("" = run here).
	Root string
	// Env, if set, replaces the environment of every command.
	Env []string
}

// Run implements Executor.
func (h *Host) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	if strings.ContainsRune(name, 0) || name == "" {
		return nil, fmt.Errorf("invalid tool name %q", name)
	}
	var cmd *exec.Cmd
	if h.Root != "" && h.Root != "/" {
		// execve runs in the child after the chroot, so the path must be the
		// tool's location inside the host root.
		path, err := h.lookInRoot(name)
		if err != nil {
			return nil, err
		}
		cmd = exec.CommandContext(ctx, path, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: h.Root}
		cmd.Dir = "/"
	} else {
		cmd = exec.CommandContext(ctx, name, args...)
	}
	if h.Env != nil {
		cmd.Env = h.Env
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Tools that fork helpers (mount.nfs, iscsiadm) must not keep the pipes
	// open past the deadline.
	cmd.WaitDelay = 5 * time.Second

	start := time.Now()
	err := cmd.Run()
	shownArgs := args
	if sensitive(ctx) {
		shownArgs = []string{"<redacted>"}
	}
	log := logrus.WithContext(ctx).WithFields(logrus.Fields{
		"tool": name, "args": shownArgs, "duration": time.Since(start).Round(time.Millisecond).String(),
	})
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ctx.Err() == nil {
			log.WithField("status", ee.ExitCode()).Debug("host tool failed")
			return stdout.Bytes(), &ExitError{Name: name, Args: shownArgs, Code: ee.ExitCode(), Stderr: stderr.String()}
		}
		if ctx.Err() != nil {
			return stdout.Bytes(), fmt.Errorf("%s: %w", name, ctx.Err())
		}
		return stdout.Bytes(), fmt.Errorf("run %s: %w", name, err)
	}
	log.Debug("host tool ran")
	return stdout.Bytes(), nil
}

// hostPath lists where a host keeps its tools, in lookup order.
var hostPath = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

func (h *Host) lookInRoot(name string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range hostPath {
		p := dir + "/" + name
		if _, err := exec.LookPath(h.Root + p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found on the host (looked in %s under %s)", name, strings.Join(hostPath, ":"), h.Root)
}
