package config

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ontap-csi/ontap-csi/backends/ontap/nametemplate"
)

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
		// An empty value inherits, as in Trident, where a pool's "" means
		// "the backend's".
		if s := strings.TrimSpace(p.str(path+"."+k, v)); s != "" {
			out[k] = setting{value: s, path: path + "." + k}
		}
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

// volumeDefaults reads "defaults" (a backend's, or a virtual pool's laid
// over its backend's) with Trident's defaults for what is not set.
func (p *parser) volumeDefaults(s map[string]setting) VolumeDefaults {
	r := defaultsReader{p: p, s: s}
	var d VolumeDefaults
	d.Size = r.size()
	d.SpaceReserve = r.oneOf("spaceReserve", defaultSpaceReserve, "none", "volume")
	d.SpaceAllocation = r.boolean("spaceAllocation", true)
	r.snapshots(&d)
	r.nas(&d)
	d.SplitOnClone = r.boolean("splitOnClone", false)
	d.FileSystemType = r.oneOf("fileSystemType", defaultFileSystemType, "ext3", "ext4", "xfs")
	d.Encryption = r.optionalBoolean("encryption")
	r.tieringAndQoS(&d)
	var formatPath string
	if d.FormatOptions, formatPath = r.get("formatOptions", ""); d.FormatOptions != "" {
		p.warn("%s is accepted for Trident compatibility but has no effect: file systems are made with mkfs's defaults", formatPath)
	}
	d.SkipRecoveryQueue = r.boolean("skipRecoveryQueue", false)
	// Keys whose effect we cannot provide: refuse them rather than silently
	// create volumes that are not what the config asks for.
	r.refuse("LUKSEncryption", "LUKS encryption is not supported")
	r.refuse("mirroring", "mirroring is not supported")
	d.NameTemplate = r.nameTemplate()
	return d
}

// nameTemplate parses a nameTemplate. A syntax error refuses the config,
// as Trident refuses the backend. Fields Trident's volume and config do
// not have fail every rendering there, which then names the volume by the
// default rule: the config loads, with a warning. The economy drivers name
// qtrees and LUNs with it, as Trident does.
func (r defaultsReader) nameTemplate() *nametemplate.Template {
	v, path := r.get("nameTemplate", "")
	if v == "" {
		return nil
	}
	t, err := nametemplate.Parse(v)
	if err != nil {
		r.p.fail(path, "%q is not a valid template: %v", v, err)
		return nil
	}
	if unknown := t.Unknown(); len(unknown) > 0 {
		r.p.warn("%s uses %s, which Trident's volume and backend config do not have: every new volume gets the default name (storagePrefix + PV name), as in Trident", path, strings.Join(unknown, ", "))
	}
	return t
}

// defaultsReader reads the values of one "defaults", reporting problems
// under the key path each value came from.
type defaultsReader struct {
	p *parser
	s map[string]setting
}

// get returns the value of key and its path, or def under the backend's
// path when the key is not set.
func (r defaultsReader) get(key, def string) (string, string) {
	if v, ok := r.s[key]; ok && v.value != "" {
		return v.value, v.path
	}
	return def, "defaults." + key
}

func (r defaultsReader) boolean(key string, def bool) bool {
	v, path := r.get(key, strconv.FormatBool(def))
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.p.fail(path, "%q is not a boolean", v)
	}
	return b
}

// optionalBoolean is nil when key is not set, leaving ONTAP's default.
func (r defaultsReader) optionalBoolean(key string) *bool {
	v, path := r.get(key, "")
	if v == "" {
		return nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.p.fail(path, "%q is not a boolean", v)
	}
	return &b
}

func (r defaultsReader) oneOf(key, def string, allowed ...string) string {
	v, path := r.get(key, def)
	if i := slices.Index(allowed, strings.ToLower(v)); i >= 0 {
		return allowed[i]
	}
	if v != "" {
		r.p.fail(path, "%q is not one of %s", v, strings.Join(allowed, ", "))
	}
	return ""
}

// refuse fails key when it is true.
func (r defaultsReader) refuse(key, why string) {
	v, path := r.get(key, "false")
	if b, err := strconv.ParseBool(v); err != nil {
		r.p.fail(path, "%q is not a boolean", v)
	} else if b {
		r.p.fail(path, "%s", why)
	}
}

func (r defaultsReader) size() int64 {
	size, path := r.get("size", defaultVolumeSize)
	if !sizeHasUnit(size) {
		size += "G" // Trident: a size without unit is in GiB
	}
	n, err := parseSize(size)
	switch {
	case err != nil:
		r.p.fail(path, "%v", err)
	case n <= 0:
		r.p.fail(path, "%q must be larger than zero", size)
	default:
		return n
	}
	return 0
}

// snapshots reads the snapshot policy, reserve and directory. Without a
// reserve, snapshot policy "none" reserves nothing, as in Trident.
func (r defaultsReader) snapshots(d *VolumeDefaults) {
	var policyPath string
	d.SnapshotPolicy, policyPath = r.get("snapshotPolicy", defaultSnapshotPolicy)
	r.p.ontapName(policyPath, "a snapshot policy", d.SnapshotPolicy)
	if v, path := r.get("snapshotReserve", ""); v != "" {
		n, err := strconv.Atoi(strings.TrimSuffix(v, "%"))
		switch {
		case err != nil:
			r.p.fail(path, "%q is not a percentage", v)
		case n < 0 || n > 90:
			r.p.fail(path, "%d is outside ONTAP's 0..90 percent", n)
		default:
			d.SnapshotReserve = &n
		}
	} else if d.SnapshotPolicy == "none" {
		d.SnapshotReserve = new(0)
	}
	d.SnapshotDir = r.boolean("snapshotDir", false)
}

// nas reads what an NFS volume gets: permissions, export policy and
// security style.
func (r defaultsReader) nas(d *VolumeDefaults) {
	perms, permsPath := r.get("unixPermissions", defaultUnixPermissions)
	if octal, err := ParseUnixPermissions(perms); err != nil {
		r.p.fail(permsPath, "%q is not unix permissions (octal like 0755 or symbolic like ---rwxr-xr-x)", perms)
	} else {
		d.UnixPermissions = octal
	}
	if v, path := r.get("exportPolicy", defaultExportPolicy); CheckExportPolicyName(v) != nil {
		r.p.fail(path, "%v", CheckExportPolicyName(v))
	} else {
		d.ExportPolicy = v
	}
	d.SecurityStyle = r.oneOf("securityStyle", defaultSecurityStyle, "unix", "mixed")
}

// tieringAndQoS reads the tiering policy (Trident's "snapshot-only" is
// ONTAP's "snapshot_only") and the QoS policy group, fixed or adaptive.
func (r defaultsReader) tieringAndQoS(d *VolumeDefaults) {
	if v, path := r.get("tieringPolicy", ""); v != "" {
		if policy, err := ParseTieringPolicy(v); err != nil {
			r.p.fail(path, "%v", err)
		} else {
			d.TieringPolicy = policy
		}
	}
	// ONTAP's REST API names fixed and adaptive policy groups alike
	// (qos.policy.name); Trident allows one of the two.
	fixed, fixedPath := r.get("qosPolicy", "")
	adaptive, adaptivePath := r.get("adaptiveQosPolicy", "")
	switch {
	case fixed != "" && adaptive != "":
		r.p.fail(adaptivePath, "only one of %s and adaptiveQosPolicy may be given", fixedPath)
	case fixed != "" && r.p.ontapName(fixedPath, "a QoS policy group", fixed):
		d.QoSPolicy = fixed
	case adaptive != "" && r.p.ontapName(adaptivePath, "an adaptive QoS policy group", adaptive):
		d.QoSPolicy = adaptive
	}
}

// CheckExportPolicyName refuses what ONTAP cannot name an export policy.
func CheckExportPolicyName(v string) error {
	if !exportPolicyNameRE.MatchString(v) {
		return fmt.Errorf("%q is not an export policy name (1-256 characters, no spaces or commas)", v)
	}
	return nil
}

// ParseTieringPolicy reads Trident's tiering policy ("snapshot-only") as
// ONTAP's REST API names it ("snapshot_only").
func ParseTieringPolicy(v string) (string, error) {
	switch policy := strings.ToLower(strings.ReplaceAll(v, "-", "_")); policy {
	case "none", "auto", "snapshot_only", "all", "backup":
		return policy, nil
	}
	return "", fmt.Errorf("%q is not one of none, auto, snapshot-only, all, backup", v)
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
