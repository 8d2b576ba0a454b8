package hostexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

func TestRunOnThisHost(t *testing.T) {
	h := &Host{}
	ctx := context.Background()
	out, err := h.Run(ctx, "echo", "a; rm -rf /", "$(id)")
	if err != nil {
		t.Fatal(err)
	}
	// Arguments reach the tool verbatim: there is no shell to interpret them.
	if got := strings.TrimSpace(string(out)); got != "a; rm -rf / $(id)" {
		t.Fatalf("echo printed %q", got)
	}

	_, err = h.Run(ctx, "sh", "-c", "echo oops >&2; exit 7")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 7 || !strings.Contains(ee.Stderr, "oops") || ExitCode(err) != 7 {
		t.Fatalf("failing tool: err = %#v", err)
	}
	if !strings.Contains(err.Error(), "sh exited with status 7: oops") {
		t.Fatalf("error text %q", err)
	}

	if _, err := h.Run(ctx, "no-such-tool-ontap-csi"); err == nil || ExitCode(err) != -1 {
		t.Fatalf("missing tool: %v", err)
	}
	if _, err := h.Run(ctx, ""); err == nil {
		t.Fatal("empty tool name accepted")
	}

	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := h.Run(tctx, "sleep", "10"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timed-out tool: err = %v", err)
	}
}

func TestRunChrootedIntoHostRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root")
	}
	root := t.TempDir()
	bin := filepath.Join(root, "usr", "sbin", "hosttool")
	build := exec.Command("go", "build", "-o", bin, "./testdata/hosttool")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build hosttool: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(root, "marker"), []byte("inside the host root\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	h := &Host{Root: root}
	out, err := h.Run(context.Background(), "hosttool")
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "inside the host root\n" {
		t.Fatalf("tool did not run chrooted: %q", out)
	}
	_, err = h.Run(context.Background(), "hosttool", "fail")
	if ExitCode(err) != 3 || !strings.Contains(err.Error(), "asked to fail") {
		t.Fatalf("failing chrooted tool: %v", err)
	}
	if _, err := h.Run(context.Background(), "mkfs.nothing"); err == nil || !strings.Contains(err.Error(), "not found on the host") {
		t.Fatalf("missing host tool: %v", err)
	}
}

func TestSensitiveArgsNeverLogged(t *testing.T) {
	var buf bytes.Buffer
	logrus.SetOutput(&buf)
	logrus.SetLevel(logrus.DebugLevel)
	t.Cleanup(func() { logrus.SetOutput(os.Stderr); logrus.SetLevel(logrus.InfoLevel) })

	h := &Host{}
	ctx := WithSensitiveArgs(context.Background())
	if _, err := h.Run(ctx, "true", "-v", "chap-secret-1"); err != nil {
		t.Fatal(err)
	}
	_, err := h.Run(ctx, "sh", "-c", "exit 3", "chap-secret-2")
	var ee *ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(fmt.Sprintf("%v %+v %#v", err, ee, ee), "chap-secret") {
		t.Fatalf("error carries the secret: %#v", ee)
	}
	if strings.Contains(buf.String(), "chap-secret") {
		t.Fatalf("log carries the secret:\n%s", buf.String())
	}
	// Without the marker the arguments are logged, which is what makes the
	// marker necessary.
	if _, err := h.Run(context.Background(), "true", "visible-arg"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "visible-arg") {
		t.Fatalf("debug log should show ordinary arguments:\n%s", buf.String())
	}
}
