// Package config parses Trident's ontap-nas and ontap-san backend
// configurations (JSON or YAML, from a file or a TridentBackendConfig),
// validates them and applies Trident's defaults.
package config

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/ontap-csi/ontap-csi/backends/ontap/internal/lif"
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
	StorageDriverName string // DriverONTAPNAS or DriverONTAPSAN
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
	Defaults            VolumeDefaults
	// Storage holds the virtual pools, each with the backend's settings
	// merged under its own.
	Storage []VirtualPool

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
}

// VirtualPool is one entry of "storage".
type VirtualPool struct {
	Name                string // Trident's "<backendName>_pool_<index>"
	Labels              map[string]string
	Region              string
	Zone                string
	SupportedTopologies []map[string]string
	Defaults            VolumeDefaults
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

type keyKind int

const (
	keyUsed    keyKind = iota + 1
	keyIgnored         // Trident knows it; we accept it and warn
)

var topKeys = map[string]keyKind{
	"version": keyUsed, "storageDriverName": keyUsed, "backendName": keyUsed, "managementLIF": keyUsed,
	"dataLIF": keyUsed, "svm": keyUsed, "username": keyUsed, "password": keyUsed, "clientCertificate": keyUsed,
	"clientPrivateKey": keyUsed, "trustedCACertificate": keyUsed, "insecureSkipTLSVerify": keyUsed,
	"credentials": keyUsed, "storagePrefix": keyUsed, "aggregate": keyUsed, "limitAggregateUsage": keyUsed,
	"limitVolumeSize": keyUsed, "nfsMountOptions": keyUsed, "autoExportPolicy": keyUsed,
	"autoExportCIDRs": keyUsed, "igroupName": keyUsed, "useCHAP": keyUsed, "chapUsername": keyUsed,
	"chapInitiatorSecret": keyUsed, "chapTargetUsername": keyUsed, "chapTargetInitiatorSecret": keyUsed,
	"defaults": keyUsed, "storage": keyUsed, "labels": keyUsed, "region": keyUsed, "zone": keyUsed,
	"supportedTopologies": keyUsed, "useREST": keyUsed, "nasType": keyUsed, "sanType": keyUsed,

	"debug": keyIgnored, "debugTraceFlags": keyIgnored, "disableDelete": keyIgnored, "serialNumbers": keyIgnored,
	"userState": keyIgnored, "usageHeartbeat": keyIgnored, "qtreePruneFlexvolsPeriod": keyIgnored,
	"qtreeQuotaResizePeriod": keyIgnored, "qtreesPerFlexvol": keyIgnored, "lunsPerFlexvol": keyIgnored,
	"emptyFlexvolDeferredDeletePeriod": keyIgnored, "cloneSplitDelay": keyIgnored,
	"limitVolumePoolSize": keyIgnored, "denyNewVolumePools": keyIgnored, "replicationPolicy": keyIgnored,
	"replicationSchedule": keyIgnored, "flexgroupAggregateList": keyIgnored, "smbShare": keyIgnored,
	"backendPools": keyIgnored,
}

var poolKeys = map[string]keyKind{
	"labels": keyUsed, "region": keyUsed, "zone": keyUsed, "supportedTopologies": keyUsed, "defaults": keyUsed,
	"nasType": keyUsed, "sanType": keyUsed, "smbShare": keyIgnored,
}

var defaultsKeys = map[string]keyKind{
	"size": keyUsed, "spaceReserve": keyUsed, "spaceAllocation": keyUsed, "snapshotPolicy": keyUsed,
	"snapshotReserve": keyUsed, "snapshotDir": keyUsed, "unixPermissions": keyUsed, "exportPolicy": keyUsed,
	"securityStyle": keyUsed, "splitOnClone": keyUsed, "fileSystemType": keyUsed, "encryption": keyUsed,
	"tieringPolicy": keyUsed, "qosPolicy": keyUsed, "formatOptions": keyUsed, "skipRecoveryQueue": keyUsed,
	// Checked for values we cannot honour.
	"LUKSEncryption": keyUsed, "mirroring": keyUsed, "nameTemplate": keyUsed,
	"adaptiveQosPolicy": keyIgnored,
}

var credentialsKeys = map[string]keyKind{"file": keyUsed, "name": keyUsed, "type": keyUsed}

var secretFileKeys = map[string]keyKind{
	"username": keyUsed, "password": keyUsed, "clientPrivateKey": keyUsed, "clientCertificate": keyUsed,
	"chapUsername": keyUsed, "chapInitiatorSecret": keyUsed, "chapTargetUsername": keyUsed,
	"chapTargetInitiatorSecret": keyUsed,
}

// parser collects every problem instead of stopping at the first.
type parser struct {
	problems []string
	warnings []string
}

func (p *parser) fail(key, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	// Values are quoted in messages; keep a pasted blob from flooding them.
	if len(msg) > 300 {
		cut := 300
		for cut > 0 && msg[cut]&0xC0 == 0x80 {
			cut--
		}
		msg = msg[:cut] + "..."
	}
	if key != "" {
		msg = key + ": " + msg
	}
	for _, existing := range p.problems {
		if existing == msg {
			return
		}
	}
	p.problems = append(p.problems, msg)
}

func (p *parser) warn(format string, args ...any) {
	p.warnings = append(p.warnings, fmt.Sprintf(format, args...))
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// toJSON accepts JSON or YAML.
func toJSON(data []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		if json.Valid(trimmed) {
			return trimmed, nil
		}
	}
	return yaml.YAMLToJSON(data)
}

// object decodes a JSON object and maps its keys, case-insensitively, to
// the canonical names of known. Unknown keys are problems; ignored ones are
// warnings and dropped.
func (p *parser) object(path string, raw json.RawMessage, known map[string]keyKind) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		if !isNull(raw) {
			p.fail(path, "must be an object, not %s", jsonKind(raw))
		}
		return map[string]json.RawMessage{}
	}
	lower := make(map[string]string, len(known))
	for k := range known {
		lower[strings.ToLower(k)] = k
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]json.RawMessage, len(m))
	for _, k := range keys {
		canon, ok := lower[strings.ToLower(k)]
		if !ok {
			msg := fmt.Sprintf("unknown key %q", k)
			if s := suggest(k, known); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			p.fail(path, "%s", msg)
			continue
		}
		if _, dup := out[canon]; dup {
			p.fail(join(path, canon), "given more than once (keys differ only in case)")
			continue
		}
		if known[canon] == keyIgnored {
			if !isNull(m[k]) {
				p.warn("%s is accepted for Trident compatibility but has no effect", join(path, canon))
			}
			continue
		}
		out[canon] = m[k]
	}
	return out
}

// suggest returns the known key closest to k, if it is close.
func suggest(k string, known map[string]keyKind) string {
	best, bestDist := "", 3
	for cand := range known {
		if d := editDistance(strings.ToLower(k), strings.ToLower(cand)); d < bestDist || d == bestDist && cand < best {
			best, bestDist = cand, d
		}
	}
	if bestDist > 2 {
		return ""
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "empty"
	}
	switch t[0] {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// str reads a value Trident types as a string. Numbers and booleans are
// taken as their text. The value is never quoted in messages, so this is
// also the reader for secrets.
func (p *parser) str(key string, raw json.RawMessage) string {
	if isNull(raw) {
		return ""
	}
	t := bytes.TrimSpace(raw)
	switch t[0] {
	case '"':
		var s string
		if err := json.Unmarshal(t, &s); err != nil {
			p.fail(key, "is not a valid string")
		}
		return s
	case 't', 'f':
		var b bool
		if json.Unmarshal(t, &b) == nil {
			return strconv.FormatBool(b)
		}
	case '{', '[':
	default:
		var n json.Number
		if json.Unmarshal(t, &n) == nil {
			return n.String()
		}
	}
	p.fail(key, "must be a string, not %s", jsonKind(raw))
	return ""
}

// boolean reads a key Trident types as bool: only true or false.
func (p *parser) boolean(key string, raw json.RawMessage) bool {
	if isNull(raw) {
		return false
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		hint := ""
		if jsonKind(raw) == "a string" {
			hint = " (write it without quotes)"
		}
		p.fail(key, "must be true or false, not %s%s", jsonKind(raw), hint)
	}
	return b
}

func (p *parser) stringList(key string, raw json.RawMessage) []string {
	if isNull(raw) {
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		p.fail(key, "must be a list of strings, not %s", jsonKind(raw))
		return nil
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		out = append(out, p.str(fmt.Sprintf("%s[%d]", key, i), it))
	}
	return out
}

func (p *parser) stringMap(key string, raw json.RawMessage) map[string]string {
	if isNull(raw) {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		p.fail(key, "must be an object of strings, not %s", jsonKind(raw))
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]string, len(m))
	for _, k := range keys {
		out[k] = p.str(key+"."+k, m[k])
	}
	return out
}

func (p *parser) topologies(key string, raw json.RawMessage) []map[string]string {
	if isNull(raw) {
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		p.fail(key, "must be a list of objects, not %s", jsonKind(raw))
		return nil
	}
	var out []map[string]string
	for i, it := range items {
		path := fmt.Sprintf("%s[%d]", key, i)
		m := p.stringMap(path, it)
		if len(m) == 0 {
			p.fail(path, "is empty")
			continue
		}
		// Topologies are matched against node labels, and a volume's
		// narrowed set is stored in its comment in a form that relies on
		// label syntax (comment.go).
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				p.fail(path, "%q is not a label key: %s", k, strings.Join(errs, "; "))
			} else if m[k] == "" {
				p.fail(path+"."+k, "is empty")
			} else if errs := validation.IsValidLabelValue(m[k]); len(errs) > 0 {
				p.fail(path+"."+k, "%q is not a label value: %s", m[k], strings.Join(errs, "; "))
			}
		}
		out = append(out, m)
	}
	return out
}

// ontapName fails key unless v can be the name of an ONTAP object of kind
// what; it reports whether v can.
func (p *parser) ontapName(key, what, v string) bool {
	if ontapNameRE.MatchString(v) {
		return true
	}
	p.fail(key, "%q is not %s name (1-256 characters, no spaces, commas, quotes or slashes)", v, what)
	return false
}

// labels reads a backend's or pool's labels: Trident matches them against
// StorageClass selectors, where a label needs a name.
func (p *parser) labels(key string, raw json.RawMessage) map[string]string {
	m := p.stringMap(key, raw)
	if _, ok := m[""]; ok {
		p.fail(key, "has a label with an empty name")
	}
	return m
}

// storagePrefixRE: ONTAP volume names take letters, digits and "_"; Trident
// turns "-" and "." into "_" when it builds names.
var storagePrefixRE = regexp.MustCompile(`^[A-Za-z_.-][A-Za-z0-9_.-]*$`)

func (p *parser) parse(source string, data []byte, dir string) *Backend {
	cfg := &Backend{Source: source}
	js, err := toJSON(data)
	if err != nil {
		p.fail("", "is neither valid JSON nor valid YAML: %v", err)
		return cfg
	}
	if isNull(js) {
		p.fail("", "is empty")
		return cfg
	}
	top := p.object("", js, topKeys)

	// version
	if raw, ok := top["version"]; !ok || isNull(raw) {
		p.fail("version", "is required and must be 1")
	} else if err := json.Unmarshal(raw, &cfg.Version); err != nil || cfg.Version != 1 {
		p.fail("version", "must be the number 1, not %s", strings.TrimSpace(string(raw)))
	}

	// storageDriverName
	cfg.StorageDriverName = p.str("storageDriverName", top["storageDriverName"])
	switch cfg.StorageDriverName {
	case DriverONTAPNAS, DriverONTAPSAN:
	case "":
		p.fail("storageDriverName", "is required (%s or %s)", DriverONTAPNAS, DriverONTAPSAN)
	default:
		p.fail("storageDriverName", "%q is not supported (supported: %s, %s)", cfg.StorageDriverName, DriverONTAPNAS, DriverONTAPSAN)
	}
	san := cfg.StorageDriverName == DriverONTAPSAN

	// Addresses.
	cfg.ManagementLIF = strings.TrimSpace(p.str("managementLIF", top["managementLIF"]))
	if cfg.ManagementLIF == "" {
		p.fail("managementLIF", "is required")
	} else if _, err := lif.HostPort(cfg.ManagementLIF); err != nil {
		p.fail("managementLIF", "%s", err)
	}
	cfg.DataLIF = strings.TrimSpace(p.str("dataLIF", top["dataLIF"]))
	if cfg.DataLIF != "" {
		host := strings.TrimSuffix(strings.TrimPrefix(cfg.DataLIF, "["), "]")
		if net.ParseIP(host) == nil && (!lif.ValidHostname(host) || dottedNumbersRE.MatchString(host)) {
			p.fail("dataLIF", "%q is neither an IP address nor a host name", cfg.DataLIF)
		} else if san {
			p.warn("dataLIF is ignored by ontap-san: all iSCSI LIFs of the SVM are used")
		}
	}
	cfg.SVM = strings.TrimSpace(p.str("svm", top["svm"]))
	if cfg.SVM == "" {
		p.fail("svm", "is required")
	} else {
		p.ontapName("svm", "an SVM", cfg.SVM)
	}
	cfg.BackendName = p.str("backendName", top["backendName"])
	if cfg.BackendName == "" && cfg.StorageDriverName != "" {
		lif := cfg.DataLIF
		if lif == "" {
			lif = cfg.ManagementLIF
		}
		cfg.BackendName = strings.ReplaceAll(cfg.StorageDriverName, "-", "") + "_" + lif
	}

	// Credentials and TLS.
	cfg.Username = p.str("username", top["username"])
	cfg.Password = Secret(p.str("password", top["password"]))
	certB64 := p.str("clientCertificate", top["clientCertificate"])
	keyB64 := Secret(p.str("clientPrivateKey", top["clientPrivateKey"]))
	caB64 := p.str("trustedCACertificate", top["trustedCACertificate"])
	cfg.InsecureSkipTLSVerify = p.boolean("insecureSkipTLSVerify", top["insecureSkipTLSVerify"])
	cfg.UseCHAP = p.boolean("useCHAP", top["useCHAP"])
	cfg.CHAPUsername = p.str("chapUsername", top["chapUsername"])
	cfg.CHAPInitiatorSecret = Secret(p.str("chapInitiatorSecret", top["chapInitiatorSecret"]))
	cfg.CHAPTargetUsername = p.str("chapTargetUsername", top["chapTargetUsername"])
	cfg.CHAPTargetInitiatorSecret = Secret(p.str("chapTargetInitiatorSecret", top["chapTargetInitiatorSecret"]))
	if raw, ok := top["credentials"]; ok && !isNull(raw) {
		p.credentials(cfg, raw, dir, &certB64, &keyB64)
	}
	p.tls(cfg, certB64, keyB64, caB64)
	if cfg.UseCHAP {
		p.chap(cfg, san)
	}

	// Provisioning settings.
	if raw, ok := top["storagePrefix"]; !ok || isNull(raw) || string(bytes.TrimSpace(raw)) == "{}" {
		// Trident: absent, null or {} mean "use the default".
		cfg.StoragePrefix = defaultStoragePrefix
	} else if jsonKind(raw) != "a string" {
		p.fail("storagePrefix", "must be a string, not %s", jsonKind(raw))
	} else {
		cfg.StoragePrefix = p.str("storagePrefix", raw)
		if cfg.StoragePrefix != "" && !storagePrefixRE.MatchString(cfg.StoragePrefix) {
			p.fail("storagePrefix", "%q may hold only letters, digits, '_', '-' and '.', and must not start with a digit", cfg.StoragePrefix)
		} else if len(cfg.StoragePrefix) > 64 {
			p.fail("storagePrefix", "is longer than 64 characters")
		}
	}
	cfg.Aggregate = strings.TrimSpace(p.str("aggregate", top["aggregate"]))
	if v := strings.TrimSpace(p.str("limitAggregateUsage", top["limitAggregateUsage"])); v != "" {
		f, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(v, "%")), 64)
		if err != nil || f <= 0 || f > 100 {
			p.fail("limitAggregateUsage", "%q is not a percentage above 0 and at most 100", v)
		}
		cfg.LimitAggregateUsage = f
	}
	if v := strings.TrimSpace(p.str("limitVolumeSize", top["limitVolumeSize"])); v != "" {
		n, err := parseSize(v)
		if err != nil {
			p.fail("limitVolumeSize", "%v", err)
		} else if n <= 0 {
			p.fail("limitVolumeSize", "%q must be larger than zero", v)
		}
		cfg.LimitVolumeSize = n
	}
	cfg.NFSMountOptions = strings.TrimSpace(p.str("nfsMountOptions", top["nfsMountOptions"]))
	if strings.ContainsFunc(cfg.NFSMountOptions, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		p.fail("nfsMountOptions", "contains control characters")
	}
	cfg.AutoExportPolicy = p.boolean("autoExportPolicy", top["autoExportPolicy"])
	cfg.AutoExportCIDRs = append([]netip.Prefix(nil), defaultAutoExportCIDRs...)
	if raw, ok := top["autoExportCIDRs"]; ok && !isNull(raw) {
		cfg.AutoExportCIDRs = nil
		for i, s := range p.stringList("autoExportCIDRs", raw) {
			pfx, err := netip.ParsePrefix(strings.TrimSpace(s))
			if err != nil {
				p.fail(fmt.Sprintf("autoExportCIDRs[%d]", i), "%q is not a CIDR (e.g. 10.0.0.0/8)", s)
				continue
			}
			cfg.AutoExportCIDRs = append(cfg.AutoExportCIDRs, pfx.Masked())
		}
		if len(cfg.AutoExportCIDRs) == 0 && len(p.problems) == 0 {
			p.fail("autoExportCIDRs", "is empty: no node would be admitted")
		}
	}
	if san && cfg.AutoExportPolicy {
		p.warn("autoExportPolicy is ignored by ontap-san")
	}
	cfg.IgroupName = strings.TrimSpace(p.str("igroupName", top["igroupName"]))
	if len(cfg.IgroupName) > 96 {
		p.fail("igroupName", "is longer than ONTAP's 96 characters")
	} else if cfg.IgroupName != "" {
		p.warn("igroupName is accepted for Trident compatibility but has no effect: every node gets its own igroup, as with Trident since 21.04")
	}
	if raw, ok := top["useREST"]; ok && !isNull(raw) && !p.boolean("useREST", raw) {
		p.warn("useREST: false is ignored: this driver speaks only the ONTAP REST API")
	}
	p.protocolTypes("", top)

	// Topology, labels and defaults.
	cfg.Labels = p.labels("labels", top["labels"])
	cfg.Region = p.str("region", top["region"])
	cfg.Zone = p.str("zone", top["zone"])
	cfg.SupportedTopologies = p.topologies("supportedTopologies", top["supportedTopologies"])
	if cfg.Region != "" || cfg.Zone != "" {
		p.warn("region and zone are accepted for Trident compatibility but have no effect: placement follows supportedTopologies")
	}
	backendDefaults := p.rawDefaults("defaults", top["defaults"], nil)
	cfg.Defaults = p.volumeDefaults(backendDefaults)

	if raw, ok := top["storage"]; ok && !isNull(raw) {
		var pools []json.RawMessage
		if err := json.Unmarshal(raw, &pools); err != nil {
			p.fail("storage", "must be a list of virtual pools, not %s", jsonKind(raw))
		}
		for i, praw := range pools {
			path := fmt.Sprintf("storage[%d]", i)
			pm := p.object(path, praw, poolKeys)
			pool := VirtualPool{
				Name:                fmt.Sprintf("%s_pool_%d", cfg.BackendName, i),
				Labels:              mergeLabels(cfg.Labels, p.labels(path+".labels", pm["labels"])),
				Region:              firstNonEmpty(p.str(path+".region", pm["region"]), cfg.Region),
				Zone:                firstNonEmpty(p.str(path+".zone", pm["zone"]), cfg.Zone),
				SupportedTopologies: p.topologies(path+".supportedTopologies", pm["supportedTopologies"]),
			}
			if pool.SupportedTopologies == nil {
				pool.SupportedTopologies = cfg.SupportedTopologies
			}
			p.protocolTypes(path, pm)
			pool.Defaults = p.volumeDefaults(p.rawDefaults(path+".defaults", pm["defaults"], backendDefaults))
			cfg.Storage = append(cfg.Storage, pool)
		}
	}
	return cfg
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// mergeLabels lays pool labels over the backend's, as Trident's label offer does.
func mergeLabels(backend, pool map[string]string) map[string]string {
	if len(backend) == 0 && len(pool) == 0 {
		return nil
	}
	out := make(map[string]string, len(backend)+len(pool))
	for k, v := range backend {
		out[k] = v
	}
	for k, v := range pool {
		out[k] = v
	}
	return out
}

func (p *parser) protocolTypes(path string, m map[string]json.RawMessage) {
	if v := strings.ToLower(p.str(join(path, "nasType"), m["nasType"])); v != "" && v != "nfs" {
		p.fail(join(path, "nasType"), "%q is not supported (only nfs)", v)
	}
	if v := strings.ToLower(p.str(join(path, "sanType"), m["sanType"])); v != "" && v != "iscsi" {
		p.fail(join(path, "sanType"), "%q is not supported (only iscsi)", v)
	}
}

// credentials reads credentials: {file: ...}. Trident's {name: <Secret>}
// form needs the TridentBackendConfig controller, which this is not.
func (p *parser) credentials(cfg *Backend, raw json.RawMessage, dir string, certB64 *string, keyB64 *Secret) {
	m := p.object("credentials", raw, credentialsKeys)
	if name := p.str("credentials.name", m["name"]); name != "" {
		p.fail("credentials.name", "Kubernetes Secrets are not read from a backend config file; use credentials.file, or username and password")
		return
	}
	file := p.str("credentials.file", m["file"])
	if file == "" {
		p.fail("credentials", "needs a file")
		return
	}
	if !filepath.IsAbs(file) {
		file = filepath.Join(dir, file)
	}
	data, err := readSmallFile(filepath.Clean(file))
	if err != nil {
		p.fail("credentials.file", "%v", err)
		return
	}
	js, err := toJSON(data)
	if err != nil {
		p.fail("credentials.file", "%q is neither valid JSON nor valid YAML", file)
		return
	}
	sm := p.object("credentials.file", js, secretFileKeys)
	set := func(key string, dst *string) {
		raw, ok := sm[key]
		if !ok || isNull(raw) {
			return
		}
		if *dst != "" {
			p.fail(key, "is given both in the config and in credentials.file")
			return
		}
		*dst = p.str("credentials.file."+key, raw)
	}
	setSecret := func(key string, dst *Secret) {
		s := string(*dst)
		set(key, &s)
		*dst = Secret(s)
	}
	set("username", &cfg.Username)
	setSecret("password", &cfg.Password)
	set("clientCertificate", certB64)
	setSecret("clientPrivateKey", keyB64)
	set("chapUsername", &cfg.CHAPUsername)
	setSecret("chapInitiatorSecret", &cfg.CHAPInitiatorSecret)
	set("chapTargetUsername", &cfg.CHAPTargetUsername)
	setSecret("chapTargetInitiatorSecret", &cfg.CHAPTargetInitiatorSecret)
}

// readSmallFile reads a regular file of at most 1 MiB: a credentials file
// that is a device or a FIFO must fail rather than block or flood us.
func readSmallFile(path string) ([]byte, error) {
	// Stat before opening: opening a FIFO would block.
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 1<<20+1))
	if err != nil {
		return nil, err
	}
	if len(data) > 1<<20 {
		return nil, fmt.Errorf("%s is larger than 1 MiB", path)
	}
	return data, nil
}

// pemValue decodes Trident's base64-encoded PEM; raw PEM is accepted too.
// Messages never include the value.
func (p *parser) pemValue(key, v string) []byte {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil
	}
	data := []byte(v)
	if !strings.HasPrefix(v, "-----BEGIN") {
		dec, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(v), ""))
		if err != nil {
			p.fail(key, "is neither base64-encoded PEM nor PEM")
			return nil
		}
		data = dec
	}
	if block, _ := pem.Decode(data); block == nil {
		p.fail(key, "holds no PEM block")
		return nil
	}
	return data
}

func (p *parser) tls(cfg *Backend, certB64 string, keyB64 Secret, caB64 string) {
	cfg.ClientCertificate = p.pemValue("clientCertificate", certB64)
	cfg.ClientPrivateKey = Secret(p.pemValue("clientPrivateKey", string(keyB64)))
	cfg.TrustedCACertificate = p.pemValue("trustedCACertificate", caB64)
	hasCert, hasKey := certB64 != "", keyB64 != ""
	switch {
	case hasCert != hasKey:
		p.fail("clientCertificate", "clientCertificate and clientPrivateKey must be given together")
	case hasCert && len(cfg.ClientCertificate) > 0 && len(cfg.ClientPrivateKey) > 0:
		if _, err := tls.X509KeyPair(cfg.ClientCertificate, []byte(cfg.ClientPrivateKey)); err != nil {
			p.fail("clientCertificate", "certificate and private key do not form a valid pair")
		}
		if cfg.Username != "" || cfg.Password != "" {
			p.warn("both a client certificate and username/password are given; the certificate is used")
		}
	case !hasCert && (cfg.Username == "" || cfg.Password == ""):
		p.fail("username", "username and password, or clientCertificate and clientPrivateKey, are required")
	}
	if len(cfg.TrustedCACertificate) > 0 && cfg.InsecureSkipTLSVerify {
		p.fail("insecureSkipTLSVerify", "contradicts trustedCACertificate; give one of them")
	}
}

func (p *parser) chap(cfg *Backend, san bool) {
	if !san {
		p.warn("useCHAP is ignored by ontap-nas")
		return
	}
	// ONTAP's limits: user names up to 128 characters, secrets up to 512.
	for _, f := range []struct {
		key   string
		value string
		max   int
	}{
		{"chapUsername", cfg.CHAPUsername, 128},
		{"chapInitiatorSecret", string(cfg.CHAPInitiatorSecret), 512},
		{"chapTargetUsername", cfg.CHAPTargetUsername, 128},
		{"chapTargetInitiatorSecret", string(cfg.CHAPTargetInitiatorSecret), 512},
	} {
		switch {
		case f.value == "":
			p.fail(f.key, "is required when useCHAP is true")
		case len(f.value) > f.max:
			p.fail(f.key, "is longer than ONTAP's %d characters", f.max)
		}
	}
	if cfg.CHAPInitiatorSecret != "" && cfg.CHAPInitiatorSecret == cfg.CHAPTargetInitiatorSecret {
		p.fail("chapTargetInitiatorSecret", "must differ from chapInitiatorSecret (ONTAP refuses equal secrets)")
	}
}

// setting is a defaults value with the key path it came from, so that an
// inherited bad value is reported once, under its own key.
type setting struct {
	value string
	path  string
}

func (p *parser) rawDefaults(path string, raw json.RawMessage, inherit map[string]setting) map[string]setting {
	out := make(map[string]setting, len(inherit))
	for k, v := range inherit {
		out[k] = v
	}
	for k, v := range p.object(path, raw, defaultsKeys) {
		if isNull(v) {
			continue
		}
		out[k] = setting{value: strings.TrimSpace(p.str(path+"."+k, v)), path: path + "." + k}
	}
	return out
}

var (
	exportPolicyNameRE = regexp.MustCompile(`^[^\s,]{1,256}$`)
	// ontapNameRE catches what cannot be an SVM, snapshot policy or QoS
	// policy group name; ONTAP itself decides whether the object exists.
	ontapNameRE = regexp.MustCompile(`^[^\s,"'/]{1,256}$`)
	// dottedNumbersRE: "256.1.1.1" is a mistyped address, not a host name.
	dottedNumbersRE = regexp.MustCompile(`^[0-9.]+$`)
	// octalPermsRE: ONTAP's nas.unix_permissions takes 1 to 4 octal digits.
	octalPermsRE    = regexp.MustCompile(`^[0-7]{1,4}$`)
	symbolicPermsRE = regexp.MustCompile(`^(?:[-rwxsStT]{3})?[-r][-w][-xsS][-r][-w][-xsS][-r][-w][-xtT]$`)
)

func (p *parser) volumeDefaults(s map[string]setting) VolumeDefaults {
	get := func(key, def string) (string, string) {
		if v, ok := s[key]; ok && v.value != "" {
			return v.value, v.path
		}
		return def, "defaults." + key
	}
	boolean := func(key string, def bool) bool {
		v, path := get(key, strconv.FormatBool(def))
		b, err := strconv.ParseBool(v)
		if err != nil {
			p.fail(path, "%q is not a boolean", v)
		}
		return b
	}
	oneOf := func(key, def string, allowed ...string) string {
		v, path := get(key, def)
		lv := strings.ToLower(v)
		for _, a := range allowed {
			if lv == a {
				return a
			}
		}
		if v != "" {
			p.fail(path, "%q is not one of %s", v, strings.Join(allowed, ", "))
		}
		return ""
	}
	var d VolumeDefaults

	size, sizePath := get("size", defaultVolumeSize)
	if !sizeHasUnit(size) {
		size += "G" // Trident: a size without unit is in GiB
	}
	if n, err := parseSize(size); err != nil {
		p.fail(sizePath, "%v", err)
	} else if n <= 0 {
		p.fail(sizePath, "%q must be larger than zero", size)
	} else {
		d.Size = n
	}
	d.SpaceReserve = oneOf("spaceReserve", defaultSpaceReserve, "none", "volume")
	d.SpaceAllocation = boolean("spaceAllocation", true)
	var snapPolicyPath string
	d.SnapshotPolicy, snapPolicyPath = get("snapshotPolicy", defaultSnapshotPolicy)
	p.ontapName(snapPolicyPath, "a snapshot policy", d.SnapshotPolicy)
	if v, path := get("snapshotReserve", ""); v != "" {
		n, err := strconv.Atoi(strings.TrimSuffix(v, "%"))
		switch {
		case err != nil:
			p.fail(path, "%q is not a percentage", v)
		case n < 0 || n > 90:
			p.fail(path, "%d is outside ONTAP's 0..90 percent", n)
		default:
			d.SnapshotReserve = &n
		}
	} else if d.SnapshotPolicy == "none" {
		d.SnapshotReserve = new(0)
	}
	d.SnapshotDir = boolean("snapshotDir", false)
	perms, permsPath := get("unixPermissions", defaultUnixPermissions)
	if octal, err := ParseUnixPermissions(perms); err != nil {
		p.fail(permsPath, "%q is not unix permissions (octal like 0755 or symbolic like ---rwxr-xr-x)", perms)
	} else {
		d.UnixPermissions = octal
	}
	if v, path := get("exportPolicy", defaultExportPolicy); !exportPolicyNameRE.MatchString(v) {
		p.fail(path, "%q is not an export policy name (1-256 characters, no spaces or commas)", v)
	} else {
		d.ExportPolicy = v
	}
	d.SecurityStyle = oneOf("securityStyle", defaultSecurityStyle, "unix", "mixed")
	d.SplitOnClone = boolean("splitOnClone", false)
	d.FileSystemType = oneOf("fileSystemType", defaultFileSystemType, "ext3", "ext4", "xfs")
	if v, path := get("encryption", ""); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			p.fail(path, "%q is not a boolean", v)
		}
		d.Encryption = &b
	}
	if v, path := get("tieringPolicy", ""); v != "" {
		switch strings.ToLower(strings.ReplaceAll(v, "-", "_")) {
		case "none", "auto", "snapshot_only", "all", "backup":
			d.TieringPolicy = strings.ToLower(strings.ReplaceAll(v, "-", "_"))
		default:
			p.fail(path, "%q is not one of none, auto, snapshot-only, all, backup", v)
		}
	}
	if v, path := get("qosPolicy", ""); v != "" && p.ontapName(path, "a QoS policy group", v) {
		d.QoSPolicy = v
	}
	var formatPath string
	if d.FormatOptions, formatPath = get("formatOptions", ""); d.FormatOptions != "" {
		p.warn("%s is accepted for Trident compatibility but has no effect: file systems are made with mkfs's defaults", formatPath)
	}
	d.SkipRecoveryQueue = boolean("skipRecoveryQueue", false)

	// Keys whose effect we cannot provide: refuse them rather than silently
	// create volumes that are not what the config asks for.
	if v, path := get("LUKSEncryption", "false"); v != "" {
		if b, err := strconv.ParseBool(v); err != nil {
			p.fail(path, "%q is not a boolean", v)
		} else if b {
			p.fail(path, "LUKS encryption is not supported")
		}
	}
	if v, path := get("mirroring", "false"); v != "" {
		if b, err := strconv.ParseBool(v); err != nil {
			p.fail(path, "%q is not a boolean", v)
		} else if b {
			p.fail(path, "mirroring is not supported")
		}
	}
	if v, path := get("nameTemplate", ""); v != "" {
		p.fail(path, "name templates are not supported: volumes are named storagePrefix + PV name")
	}
	return d
}

// ParseUnixPermissions accepts octal ("755", "0755") or Trident's symbolic
// form ("---rwxrwxrwx", "rwxr-xr-x") and returns octal digits.
func ParseUnixPermissions(v string) (string, error) {
	if octalPermsRE.MatchString(v) {
		if len(v) == 4 && v[0] == '0' {
			v = v[1:]
		}
		return v, nil
	}
	if !symbolicPermsRE.MatchString(v) {
		return "", fmt.Errorf("invalid permissions %q", v)
	}
	special := 0
	if len(v) == 12 {
		// Trident's leading triple: setuid, setgid, sticky.
		for i, bit := range []int{4, 2, 1} {
			if v[i] != '-' {
				special |= bit
			}
		}
		v = v[3:]
	}
	digits := make([]byte, 0, 4)
	if special != 0 {
		digits = append(digits, byte('0'+special))
	}
	for i := 0; i < 9; i += 3 {
		n := 0
		if v[i] == 'r' {
			n |= 4
		}
		if v[i+1] == 'w' {
			n |= 2
		}
		if x := v[i+2]; x == 'x' || x == 's' || x == 't' {
			n |= 1
		}
		digits = append(digits, byte('0'+n))
	}
	return string(digits), nil
}
