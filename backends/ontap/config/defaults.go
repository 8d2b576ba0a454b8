package config

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
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
