package ontap

import (
	"crypto/sha1" //nolint:gosec // name-based UUIDs (RFC 4122 v5), not security
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// ONTAP name limits (docs/design/ontap-rest.md §4.1).
const (
	maxVolumeName   = 203
	maxSnapshotName = 255
	maxIgroupName   = 96
	// hashSuffixLen is the hex digits of SHA-256 appended to a name that
	// had to be shortened or sanitized: 64 bits keep collisions out of
	// reach for any realistic number of volumes.
	hashSuffixLen = 16
)

var (
	volumeNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	volumeCharRE = regexp.MustCompile(`[^A-Za-z0-9_]`)
	// tridentPVRE matches the part after the prefix of a name Trident made
	// from a Kubernetes PV name: "pvc-<uuid>" with '-' turned into '_'.
	tridentPVRE = regexp.MustCompile(`^pvc_[0-9a-f]{8}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{12}$`)
	uuidRE      = `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`
	// legacyBackendPolicyRE: Trident ≤ 24.10 autoExportPolicy used one
	// policy per backend, "trident-<backendUUID>", shared by all volumes.
	legacyBackendPolicyRE = regexp.MustCompile(`^trident-` + uuidRE + `$`)
	wholeUUIDRE           = regexp.MustCompile(`^` + uuidRE + `$`)
)

// tridentName is Trident's mapping of a name to an ONTAP volume name
// (getInternalVolumeNameCommon): '-' and '.' become '_', then "__" becomes
// "_" in one pass.
func tridentName(s string) string {
	s = strings.ReplaceAll(s, "-", "_")
	s = strings.ReplaceAll(s, ".", "_")
	return strings.ReplaceAll(s, "__", "_")
}

func hashSuffix(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:hashSuffixLen]
}

// volumeName is the ONTAP volume name of a CSI volume: Trident's
// storagePrefix + name mapping, so that volumes Trident made are found
// under their PV name. A name that mapping cannot turn into a valid ONTAP
// name (characters ONTAP refuses, too long) is sanitized, shortened and
// given a hash of the full name, which keeps it deterministic and unique.
func volumeName(prefix, csiName string) string {
	full := prefix + csiName
	if n := tridentName(full); len(n) <= maxVolumeName && volumeNameRE.MatchString(n) {
		return n
	}
	n := volumeCharRE.ReplaceAllString(tridentName(full), "_")
	if n == "" || n[0] >= '0' && n[0] <= '9' {
		n = "_" + n
	}
	keep := maxVolumeName - 1 - hashSuffixLen
	if len(n) > keep {
		n = n[:keep]
	}
	return n + "_" + hashSuffix(full)
}

// pvNameFromVolume recovers the PV name of a volume Trident made, which
// carries no record of it: "<prefix>pvc_<uuid>" is PV "pvc-<uuid>".
func pvNameFromVolume(prefix, volume string) (string, bool) {
	rest, ok := strings.CutPrefix(volume, tridentName(prefix))
	if !ok || !tridentPVRE.MatchString(rest) {
		return "", false
	}
	return strings.ReplaceAll(rest, "_", "-"), true
}

// snapshotName is the ONTAP name of a CSI snapshot: the CSI name itself
// (as in Trident) when ONTAP accepts it, else a sanitized, hashed form.
func snapshotName(csiName string) string {
	if csiName != "" && len(csiName) <= maxSnapshotName && !strings.ContainsAny(csiName, "/, \t\r\n") &&
		csiName != "." && csiName != ".." && printableASCII(csiName) {
		return csiName
	}
	var b strings.Builder
	for _, r := range csiName {
		if r > ' ' && r < 0x7f && !strings.ContainsRune("/,", r) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	n := b.String()
	keep := maxSnapshotName - 1 - hashSuffixLen
	if len(n) > keep {
		n = n[:keep]
	}
	return n + "_" + hashSuffix(csiName)
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// lunPath is where a volume's LUN lives (Trident: lun0).
func lunPath(volume string) string { return "/vol/" + volume + "/lun0" }

// igroupName is the per-node igroup "<node>-<installationID>" (Trident
// 22.07+). A node name too long for ONTAP's 96 characters is shortened
// with a hash rather than truncated, so that two long node names sharing a
// prefix never share an igroup.
func igroupName(node, installationID string) string {
	n := node + "-" + installationID
	if len(n) <= maxIgroupName {
		return n
	}
	keep := maxIgroupName - len(installationID) - 1 - 1 - 8
	return node[:keep] + "_" + hashSuffix(node)[:8] + "-" + installationID
}

// isNodeIgroup reports whether name is a per-node igroup of node made by
// any installation: ours, or Trident's (which truncates long node names).
// The node name is compared as a string, never compiled into a pattern: it
// comes from the CO.
func isNodeIgroup(name, node, installationID string) bool {
	if name == igroupName(node, installationID) {
		return true
	}
	tridentNode := node
	if max := maxIgroupName - 36 - 1; len(tridentNode) > max {
		tridentNode = tridentNode[:max]
	}
	rest, ok := strings.CutPrefix(name, tridentNode+"-")
	return ok && wholeUUIDRE.MatchString(rest)
}

// isAnyNodeIgroup reports whether name is a per-node igroup of the
// installation.
func isAnyNodeIgroup(name, installationID string) bool {
	return len(name) > len(installationID)+1 && strings.HasSuffix(name, "-"+installationID)
}

// emptyPolicyName is the export policy without rules that volumes carry
// while no node has them published (Trident 25.02+: "<storagePrefix>empty").
func emptyPolicyName(prefix string) string { return prefix + "empty" }

// nameUUID derives an RFC 4122 version 5 UUID from a name, so identifiers
// that must be stable across controller restarts and replicas need no
// stored state.
func nameUUID(name string) string {
	// The URL namespace of RFC 4122; the names below are our own URLs.
	ns := [16]byte{0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}
	h := sha1.New() //nolint:gosec // see import
	h.Write(ns[:])
	h.Write([]byte(name))
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}
