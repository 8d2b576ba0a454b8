// Package config parses Trident's ontap-nas and ontap-san backend
// configurations (JSON or YAML, from a file or a TridentBackendConfig),
// validates them and applies Trident's defaults.
package config

import (
	"encoding/json"
	"fmt"
	"github.com/ontap-csi/ontap-csi/backends/ontap/nametemplate"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"
)

// Storage driver names.
const (
	DriverONTAPNAS = "ontap-nas"
	DriverONTAPSAN = "ontap-san"
)

// Trident's defaults for a backend config.
const (
	defaultStoragePrefix   = "trident_"
	defaultVolumeSize      = "1G" // 1 GiB: Trident reads single-letter units as binary
	defaultSpaceReserve    = "none"
	defaultSnapshotPolicy  = "none"
	defaultUnixPermissions = "777" // Trident's "---rwxrwxrwx"
	defaultExportPolicy    = "default"
	defaultSecurityStyle   = "unix"
	defaultFileSystemType  = "ext4"
)

// defaultAutoExportCIDRs admit every node address, as in Trident.
var defaultAutoExportCIDRs = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}

// Secret holds a credential from the backend config. It prints, marshals and
// logs as "<redacted>"; string(s) reads it.
type Secret string

func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "<redacted>"
}

func (s Secret) GoString() string              { return strconv.Quote(s.String()) }
func (s Secret) LogValue() slog.Value          { return slog.StringValue(s.String()) }
func (s Secret) MarshalText() ([]byte, error)  { return []byte(s.String()), nil }
func (s Secret) Format(f fmt.State, verb rune) { _, _ = f.Write([]byte(s.String())) }

// Backend is a Trident ontap-nas/ontap-san backend configuration,
// validated, with Trident's defaults applied. Printing or logging it never
// shows a credential.
type Backend struct {
	Source string // the file name (or label) used in messages

	Version           int
	StorageDriverName string // DriverONTAPNAS, DriverONTAPSAN or an economy driver
	BackendName       string
	ManagementLIF     string
	DataLIF           string
	SVM               string

	Username string
	Password Secret
	// ClientCertificate, ClientPrivateKey and TrustedCACertificate are PEM
	// (the config carries them base64-encoded, as in Trident).
	ClientCertificate    []byte
	ClientPrivateKey     Secret
	TrustedCACertificate []byte
	// InsecureSkipTLSVerify is our explicit opt-out of server certificate
	// verification (key "insecureSkipTLSVerify"). Trident skips verification
	// whenever no trustedCACertificate is given; we verify against the
	// system roots instead.
	InsecureSkipTLSVerify bool

	StoragePrefix       string
	Aggregate           string
	LimitAggregateUsage float64 // percent; 0 means no limit
	LimitVolumeSize     int64   // bytes; 0 means no limit
	NFSMountOptions     string
	AutoExportPolicy    bool
	AutoExportCIDRs     []netip.Prefix
	IgroupName          string

	UseCHAP                   bool
	CHAPUsername              string
	CHAPInitiatorSecret       Secret
	CHAPTargetUsername        string
	CHAPTargetInitiatorSecret Secret

	Labels              map[string]string
	Region              string
	Zone                string
	SupportedTopologies []map[string]string
	// UseBalancedPlacement lets ONTAP choose the aggregate of each new
	// volume (ONTAP 9.19.1+), as Trident's useBalancedPlacement does.
	UseBalancedPlacement bool
	Defaults             VolumeDefaults
	// Storage holds the virtual pools, each with the backend's settings
	// merged under its own.
	Storage []VirtualPool
	// Economy is set for the economy drivers (economy.go).
	Economy *Economy

	// UserState is Trident's "normal" or "suspended": a suspended
	// backend takes no new volumes but clones, and serves its own.
	UserState string
	// AWS is Trident's "aws" section of an FSx for NetApp ONTAP backend,
	// nil when absent.
	AWS *AWS

	// Warnings lists accepted keys that have no effect (also logged).
	Warnings []string
}

// VolumeDefaults are the per-volume settings of "defaults" (and of a
// virtual pool's "defaults").
type VolumeDefaults struct {
	Size            int64  // bytes
	SpaceReserve    string // "none" (thin) or "volume" (thick)
	SpaceAllocation bool
	SnapshotPolicy  string
	// SnapshotReserve is the percent to request; nil leaves ONTAP's default.
	// Unset with snapshotPolicy "none" it is 0, as in Trident.
	SnapshotReserve   *int
	SnapshotDir       bool
	UnixPermissions   string // octal digits, e.g. "777"
	ExportPolicy      string
	SecurityStyle     string
	SplitOnClone      bool
	FileSystemType    string
	Encryption        *bool  // nil leaves ONTAP's default
	TieringPolicy     string // ONTAP's spelling (snapshot_only); "" leaves ONTAP's default
	QoSPolicy         string
	FormatOptions     string
	SkipRecoveryQueue bool
	// NameTemplate names new volumes of ontap-nas and ontap-san (Trident's
	// nameTemplate); nil: storagePrefix + PV name.
	NameTemplate *nametemplate.Template
}

// VirtualPool is one entry of "storage".
type VirtualPool struct {
	Name                 string // Trident's "<backendName>_pool_<index>"
	Labels               map[string]string
	Region               string
	Zone                 string
	SupportedTopologies  []map[string]string
	UseBalancedPlacement bool
	Defaults             VolumeDefaults
}

// User states of a backend (Trident's userState).
const (
	UserStateNormal    = "normal"
	UserStateSuspended = "suspended"
)

// AWS is the "aws" section: the FSx for NetApp ONTAP file system a backend
// is on, and the AWS API credentials Trident would use to reach it.
type AWS struct {
	APIRegion       string
	FSxFilesystemID string
	APIKey          Secret
	SecretKey       Secret
}

// String shows the configuration as JSON without credentials (Secret
// fields marshal as "<redacted>"; certificates show as "<set>").
func (c Backend) String() string {
	type plain Backend // no methods: no recursion
	view := struct {
		plain
		// Shadow the embedded certificate fields.
		ClientCertificate    string `json:",omitempty"`
		TrustedCACertificate string `json:",omitempty"`
	}{plain: plain(c)}
	if len(c.ClientCertificate) > 0 {
		view.ClientCertificate = "<set>"
	}
	if len(c.TrustedCACertificate) > 0 {
		view.TrustedCACertificate = "<set>"
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(view); err != nil {
		return "config.Backend{" + c.Source + "}"
	}
	return strings.TrimSpace(b.String())
}

func (c Backend) GoString() string     { return c.String() }
func (c Backend) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Load reads and parses a backend config file (JSON or YAML).
// A relative credentials.file is read from the config file's directory.
func Load(path string) (*Backend, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("backend config %q: %w", path, err)
	}
	return Parse(path, data, filepath.Dir(path))
}

// Parse parses a backend config (JSON or YAML). source names
// it in messages; dir is where a relative credentials.file is read from.
// All invalid values are reported together, each with its key.
//
// Keys are matched case-insensitively, as Trident's JSON decoding does.
// Keys Trident knows but we do not implement are accepted with a warning;
// unknown keys are rejected. Where Trident types a value as a string
// ("true", "10", "1Gi"), numbers and booleans written without quotes (as
// YAML invites) are accepted too; Trident's boolean keys take booleans only.
//
// Credentials may come from a file: credentials: {file: "creds.json"}, a
// JSON or YAML object with the keys of Trident's backend Secret (username,
// password, clientPrivateKey, chapUsername, chapInitiatorSecret,
// chapTargetUsername, chapTargetInitiatorSecret).
func Parse(source string, data []byte, dir string) (*Backend, error) {
	p := &parser{}
	cfg := p.parse(source, data, dir)
	if len(p.problems) > 0 {
		return nil, fmt.Errorf("backend config %q: %s", source, strings.Join(p.problems, "; "))
	}
	for _, w := range p.warnings {
		logrus.WithField("backendConfig", source).Warn(w)
	}
	cfg.Warnings = p.warnings
	return cfg, nil
}
