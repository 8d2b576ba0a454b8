package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

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
	"useBalancedPlacement": keyUsed, "userState": keyUsed, "aws": keyUsed,
	// The economy drivers' keys; other drivers warn of them (economy.go).
	"qtreesPerFlexvol": keyUsed, "lunsPerFlexvol": keyUsed, "limitVolumePoolSize": keyUsed,
	"denyNewVolumePools": keyUsed, "emptyFlexvolDeferredDeletePeriod": keyUsed,
	"qtreePruneFlexvolsPeriod": keyUsed, "qtreeQuotaResizePeriod": keyUsed,

	"debug": keyIgnored, "debugTraceFlags": keyIgnored, "disableDelete": keyIgnored, "serialNumbers": keyIgnored,
	"usageHeartbeat": keyIgnored, "cloneSplitDelay": keyIgnored, "replicationPolicy": keyIgnored,
	"replicationSchedule": keyIgnored, "flexgroupAggregateList": keyIgnored, "smbShare": keyIgnored,
	"backendPools": keyIgnored, "flags": keyIgnored, "gcnv": keyIgnored,
}

var poolKeys = map[string]keyKind{
	"labels": keyUsed, "region": keyUsed, "zone": keyUsed, "supportedTopologies": keyUsed, "defaults": keyUsed,
	"nasType": keyUsed, "sanType": keyUsed, "useBalancedPlacement": keyUsed, "smbShare": keyIgnored,
}

var defaultsKeys = map[string]keyKind{
	"size": keyUsed, "spaceReserve": keyUsed, "spaceAllocation": keyUsed, "snapshotPolicy": keyUsed,
	"snapshotReserve": keyUsed, "snapshotDir": keyUsed, "unixPermissions": keyUsed, "exportPolicy": keyUsed,
	"securityStyle": keyUsed, "splitOnClone": keyUsed, "fileSystemType": keyUsed, "encryption": keyUsed,
	"tieringPolicy": keyUsed, "qosPolicy": keyUsed, "adaptiveQosPolicy": keyUsed, "formatOptions": keyUsed,
	"skipRecoveryQueue": keyUsed,
	// Checked for values we cannot honour.
	"LUKSEncryption": keyUsed, "mirroring": keyUsed, "nameTemplate": keyUsed,
	"adAdminUser": keyIgnored,
}

// awsKeys are Trident's AWSConfig: what an FSx for NetApp ONTAP backend
// carries.
var awsKeys = map[string]keyKind{
	"apiRegion": keyUsed, "fsxFilesystemID": keyUsed, "apiKey": keyUsed, "secretKey": keyUsed,
}

// ignoredBecause says, for each keyIgnored key, what happens instead; the
// one warning a set key gets names it and says this.
var ignoredBecause = map[string]string{
	"debug":                  "log levels come from the --log_level and --debug flags",
	"debugTraceFlags":        "log levels come from the --log_level and --debug flags",
	"disableDelete":          "deleting a PV deletes its ONTAP volume, as Trident (which also ignores this key) does",
	"serialNumbers":          "Trident records it for itself; ontap-csi reads nothing from it",
	"backendPools":           "Trident records it for itself; ontap-csi reads nothing from it",
	"flags":                  "Trident records it for itself; ontap-csi reads nothing from it",
	"usageHeartbeat":         "Trident's economy drivers report usage with it; ontap-csi sends no usage reports",
	"cloneSplitDelay":        "clones of a snapshot being deleted are split at the first delete attempt, without a delay",
	"replicationPolicy":      "volumes are not mirrored: ontap-csi does not manage SnapMirror",
	"replicationSchedule":    "volumes are not mirrored: ontap-csi does not manage SnapMirror",
	"flexgroupAggregateList": "only ontap-nas-flexgroup uses it; volumes are FlexVols",
	"smbShare":               "only SMB volumes use it; ontap-csi serves NFS and iSCSI",
	"adAdminUser":            "only SMB volumes use it; ontap-csi serves NFS and iSCSI",
	"gcnv":                   "ontap-csi talks to ONTAP directly at managementLIF, not through the Google Cloud NetApp Volumes proxy",
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
	// driver is the storageDriverName, read first.
	driver string
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

// warn records a warning once: a backend's defaults are read again for
// each virtual pool that inherits them.
func (p *parser) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !slices.Contains(p.warnings, msg) {
		p.warnings = append(p.warnings, msg)
	}
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
				p.warn("%s is accepted for Trident compatibility but has no effect: %s", join(path, canon), ignoredBecause[canon])
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
