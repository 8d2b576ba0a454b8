package iscsi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/node/hostexec"
	"github.com/ontap-csi/ontap-csi/node/volumelock"
)

var (
	// ErrNotAttached: Resize found no SCSI device of the LUN (with its
	// serial).
	ErrNotAttached = errors.New("iSCSI LUN is not attached")
	// ErrAuthFailed: the target refused every login with a CHAP error.
	ErrAuthFailed = errors.New("iSCSI login failed: authorization failure")
	// ErrSerialMismatch: the device at the LUN's address, or its multipath
	// map, belongs to another LUN and a rescan did not fix it.
	ErrSerialMismatch = errors.New("iSCSI LUN serial mismatch")
	// ErrDeviceInUse: the device to remove is still mounted or held.
	ErrDeviceInUse = errors.New("device is in use")
	// ErrInvalidTarget: the Target is malformed (a publish-context problem).
	ErrInvalidTarget = errors.New("invalid iSCSI target")
)

// CHAP holds the CHAP credentials of a target. It is never logged; fmt
// prints it redacted.
type CHAP struct {
	Username        string // iscsiUsername
	InitiatorSecret string // iscsiInitiatorSecret
	TargetUsername  string // iscsiTargetUsername: mutual CHAP when set
	TargetSecret    string // iscsiTargetSecret
}

// String keeps secrets out of any %v of a Target.
func (CHAP) String() string { return "CHAP{redacted}" }

// GoString keeps secrets out of %#v.
func (CHAP) GoString() string { return "CHAP{redacted}" }

// Target identifies one LUN behind an iSCSI target, from the publish
// context (docs/design/trident-compat.md §3.2).
type Target struct {
	IQN       string   // iscsiTargetIqn
	Portals   []string // p1..pN, "ip[:port]"; port 3260 when absent
	LUN       int32    // iscsiLunNumber
	Serial    string   // iscsiLunSerial, checked against every device used or removed
	Interface string   // iscsiInterface; "" means "default"
	CHAP      *CHAP    // nil unless useCHAP
	// Shared is sharedTarget. It is informational: whether a target is
	// shared or not, a session is logged out only once no LUN of it is
	// attached, which is the safe reading of both.
	Shared bool
}

// Device is an attached LUN.
type Device struct {
	// Path is the block device to use: the multipath map (/dev/dm-3) or
	// the single path (/dev/sdb); symlinks resolved.
	Path      string
	Multipath bool
	// Paths are the SCSI path devices of the LUN, in portal order.
	Paths []string
	// Size is the size of Path in bytes.
	Size int64
}

// MultipathMode says whether Attach uses dm-multipath.
type MultipathMode int

const (
	// MultipathAuto uses multipath when multipathd runs and a single path
	// (with a warning) when it does not.
	MultipathAuto MultipathMode = iota
	// MultipathRequired fails an Attach when multipathd does not run, as
	// Trident does since 22.10.
	MultipathRequired
	// MultipathDisabled never waits for a map. A map that exists anyway
	// (multipathd grabbed the paths) is still what Attach returns.
	MultipathDisabled
)

// Config configures a Client.
type Config struct {
	// Exec runs iscsiadm, multipath(d) and blockdev (required).
	Exec hostexec.Executor
	// DevDir and SysRoot are where the host's /dev and /sys are seen
	// ("/dev" and "/sys" by default; tests point them at their roots).
	DevDir  string
	SysRoot string
	// UdevDataDir is udev's database of the devices it has processed
	// (<host root>/run/udev/data); "" when there is none to read (the
	// shims' emulated sysfs). A map that is late is then blamed on the
	// right daemon: multipathd adds a path only once udev has processed
	// it, and a busy udev lags the kernel by minutes (issue 16).
	UdevDataDir string
	// LockDir holds the per-target lock files (required). It must be the
	// same directory for every node-plugin process on the host, so that
	// two generations serving kubelet during a handover (I8) serialize
	// their logins and logouts of a shared target.
	LockDir string
	// DeviceTimeout bounds each wait for the kernel: a scanned LUN's
	// device, its multipath map, a removed device's disappearance, a
	// rescanned size. Default 20 s, like Trident's attach retry.
	DeviceTimeout time.Duration
	Multipath     MultipathMode
	// DeadPathGrace is how long, at an unstage, all paths of a LUN's
	// multipath map may stay failed before it stops queueing I/O
	// (ReleaseDeadMapsDuring); DefaultDeadPathGrace if not positive.
	DeadPathGrace time.Duration
}

const defaultDeviceTimeout = 20 * time.Second

// Client attaches and detaches ONTAP LUNs on this host. It keeps no state
// between calls: every call starts from what iscsiadm and sysfs report, so
// any process can finish what another started (see the package doc).
type Client struct {
	exec    hostexec.Executor
	devDir  string
	sysRoot string
	udevDir string // Config.UdevDataDir
	timeout time.Duration
	mode    MultipathMode
	locks   *volumelock.Locker
	// deadPathGrace: see Config.DeadPathGrace.
	deadPathGrace time.Duration
	// The last answer of multipathd about itself, until mpUntil
	// (multipathActive).
	mpMu     sync.Mutex
	mpActive bool
	mpUntil  time.Time
}

// New returns a Client for cfg.
func New(cfg Config) (*Client, error) {
	if cfg.Exec == nil {
		return nil, errors.New("iscsi: Config.Exec is required")
	}
	if cfg.LockDir == "" {
		return nil, errors.New("iscsi: Config.LockDir is required")
	}
	locks, err := volumelock.New(cfg.LockDir)
	if err != nil {
		return nil, fmt.Errorf("iscsi: %w", err)
	}
	c := &Client{
		exec:    cfg.Exec,
		devDir:  filepath.Clean(orDefault(cfg.DevDir, "/dev")),
		sysRoot: filepath.Clean(orDefault(cfg.SysRoot, "/sys")),
		udevDir: cfg.UdevDataDir,
		timeout: cfg.DeviceTimeout,
		mode:    cfg.Multipath,
		locks:   locks,
	}
	if c.timeout <= 0 {
		c.timeout = defaultDeviceTimeout
	}
	if c.deadPathGrace = cfg.DeadPathGrace; c.deadPathGrace <= 0 {
		c.deadPathGrace = DefaultDeadPathGrace
	}
	return c, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

var ifaceRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// maxLUN is the largest LUN id a flat-space SCSI address holds; ONTAP uses
// 0..4095.
const maxLUN = 16383

// normalized validates t and returns a copy with canonical portals and the
// default interface filled in.
func (t Target) normalized() (Target, error) {
	if err := validateIQN(t.IQN); err != nil {
		return t, fmt.Errorf("%w: %v", ErrInvalidTarget, err)
	}
	if len(t.Portals) == 0 {
		return t, fmt.Errorf("%w: no portals", ErrInvalidTarget)
	}
	if t.LUN < 0 || t.LUN > maxLUN {
		return t, fmt.Errorf("%w: LUN %d out of range", ErrInvalidTarget, t.LUN)
	}
	if t.Serial == "" || len(t.Serial) > 64 {
		return t, fmt.Errorf("%w: a LUN serial is required to verify devices", ErrInvalidTarget)
	}
	for _, r := range t.Serial {
		if r <= ' ' || r > '~' {
			return t, fmt.Errorf("%w: unprintable LUN serial", ErrInvalidTarget)
		}
	}
	if t.Interface == "" {
		t.Interface = "default"
	}
	if !ifaceRE.MatchString(t.Interface) {
		return t, fmt.Errorf("%w: interface %q", ErrInvalidTarget, truncate(t.Interface, 64))
	}
	if t.CHAP != nil && (t.CHAP.Username == "" || t.CHAP.InitiatorSecret == "") {
		return t, fmt.Errorf("%w: CHAP needs a user name and an initiator secret", ErrInvalidTarget)
	}
	if t.CHAP != nil && (t.CHAP.TargetUsername == "") != (t.CHAP.TargetSecret == "") {
		return t, fmt.Errorf("%w: mutual CHAP needs both a target user name and secret", ErrInvalidTarget)
	}
	portals := make([]string, 0, len(t.Portals))
	seen := map[string]bool{}
	for _, p := range t.Portals {
		n, err := normalizePortal(p)
		if err != nil {
			return t, fmt.Errorf("%w: %v", ErrInvalidTarget, err)
		}
		if !seen[n] {
			seen[n] = true
			portals = append(portals, n)
		}
	}
	t.Portals = portals
	return t, nil
}

// log is the logger for work on t within the call of ctx, whose request id
// it carries (server.RequestIDHook).
func (t Target) log(ctx context.Context) *logrus.Entry {
	return logrus.WithContext(ctx).WithFields(t.fields())
}

func (t Target) fields() logrus.Fields {
	return logrus.Fields{"target": t.IQN, "lun": t.LUN, "serial": t.Serial}
}

// lockTarget serializes the session-level decisions on one target (log in,
// log out when unused) across goroutines and processes, and excludes the
// attaches that hold lockTargetShared. Path devices of different LUNs are
// otherwise handled concurrently.
func (c *Client) lockTarget(ctx context.Context, iqn string) (func(), error) {
	return c.locks.Lock(ctx, "iscsi-target/"+iqn)
}

// lockTargetShared is the target lock of an attach whose sessions exist:
// attaches share it, lockTarget excludes them.
func (c *Client) lockTargetShared(ctx context.Context, iqn string) (func(), error) {
	return c.locks.LockShared(ctx, "iscsi-target/"+iqn)
}

// beforeSideEffect, when set by a test, runs before every host tool and
// every sysfs write: the crash test kills the process there to prove that
// each step can be interrupted and retried.
var beforeSideEffect func(what string)

func (c *Client) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	if beforeSideEffect != nil {
		beforeSideEffect(name)
	}
	return c.exec.Run(ctx, name, args...)
}

// writeAttr writes a sysfs control attribute (scan, rescan, delete). O_TRUNC
// matters only for the test shims, whose attributes are regular files; the
// kernel ignores it.
func (c *Client) writeAttr(path, value string) error {
	if beforeSideEffect != nil {
		beforeSideEffect("write " + filepath.Base(path))
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Waits on sysfs poll with a backoff: each pause is a quarter of the time
// waited so far, at least pollFirst and at most pollCap. A wait then ends
// at most a quarter (or a millisecond) after what it waits for has
// happened: the kernel answers a scan, a delete or a map flush within a
// few milliseconds, and a doubling pause (1, 2, 4, 8, 16 ms) overshot such
// a wait by up to its own length, twice per iSCSI unstage (the map's
// removal, then its paths'), issue 18. A wait for something slow (udev's
// links, multipathd's map, a path that never comes) still costs at most
// one look per pollCap; a look is one lstat or one small sysfs read.
//
// Polling and not inotify: sysfs (kernfs) raises no inotify event when a
// device directory appears under a session, when a holders/ or slaves/
// link is added, or when an attribute changes (only attributes the driver
// notifies with sysfs_notify wake poll(2), and none of these is one), so a
// watch would never fire on a real kernel. The iSCSI shim's tree is a plain
// directory where a watch would fire; the same code must serve both.
const (
	pollFirst = 1 * time.Millisecond
	pollCap   = 20 * time.Millisecond
)

// backoff paces one wait: next returns the pause before the next look.
// The wait starts at the first call; a zero backoff starts a new wait.
type backoff struct {
	start time.Time
	now   func() time.Time // time.Now; tests set it
}

func (b *backoff) next() time.Duration {
	now := time.Now
	if b.now != nil {
		now = b.now
	}
	t := now()
	if b.start.IsZero() {
		b.start = t
	}
	return min(max(t.Sub(b.start)/4, pollFirst), pollCap)
}

// errWaitTimedOut ends a wait for the kernel that ran out of the Client's
// DeviceTimeout.
var errWaitTimedOut = errors.New("timed out")

// waitEnded is why a wait for the kernel ended unsuccessfully: the
// caller's context error when that ended (the CO's deadline or a cancel),
// else errWaitTimedOut. The device timeout is not the CO's deadline and
// must not read as one: DeadlineExceeded tells kubelet that the call may
// still be running (docs/design/architecture.md §7.1).
func waitEnded(caller context.Context) error {
	if err := caller.Err(); err != nil {
		return err
	}
	return errWaitTimedOut
}

// waited is how long a wait that began at start lasted, for its error: the
// caller's deadline may end it well before the device timeout, and a
// message naming the timeout would then send an operator the wrong way.
func waited(start time.Time) time.Duration {
	return time.Since(start).Round(time.Millisecond)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
