package ontap

import (
	"crypto/sha256"
	"regexp"
	"strconv"
	"strings"
)

// Names of the economy drivers, as Trident 26.06 makes them
// (docs/design/economy.md §5.1).

// ONTAP's limits on the names economy volumes take.
const (
	maxQtreeName = 64  // ONTAP's qtree limit, Trident's maxQtreeNameLength
	maxLUNName   = 254 // Trident's maxLunNameLength
	// poolSuffixLen is the length of the random part of Trident's pool
	// names: crypto.RandomString(10), upper-case letters.
	poolSuffixLen = 10
)

// econInternalName is Trident's internal name of an economy volume (its
// qtree or LUN name): storagePrefix + name, '-' and '.' made '_', then
// "__" made "_" until none is left (getInternalVolumeNameCommon). Names
// that mapping cannot give back (a CSI name with '_', '.' or "--"), or
// that would exceed max, get a deterministic hashed name instead; it holds
// "__", which the mapping never produces, so the two never meet.
func econInternalName(prefix, csiName string, max int) string {
	n := collapseUnderscores(strings.NewReplacer("-", "_", ".", "_").Replace(prefix + csiName))
	if simpleNameRE.MatchString(csiName) && len(n) <= max {
		return n
	}
	p := collapseUnderscores(strings.NewReplacer("-", "_", ".", "_").Replace(prefix))
	const tail = len("x__") + 32
	if len(p) > max-tail {
		p = p[:max-tail]
	}
	return p + "x__" + hashSuffix(prefix + csiName)[:16] + hashSuffix("2:" + prefix + csiName)[:16]
}

// simpleNameRE matches the CSI names econInternalName maps reversibly: a
// PV name ("pvc-<uuid>") is one.
var simpleNameRE = regexp.MustCompile(`^[A-Za-z0-9]+(-[A-Za-z0-9]+)*$`)

// reversedNameRE matches what simple names become after the prefix.
var reversedNameRE = regexp.MustCompile(`^[A-Za-z0-9]+(_[A-Za-z0-9]+)*$`)

// econVolumeID is the CSI volume ID of an economy volume's internal name:
// the inverse of econInternalName, ok false for hashed names and names
// outside the prefix (they are found by ID only).
func econVolumeID(prefix, internal string) (string, bool) {
	p := collapseUnderscores(strings.NewReplacer("-", "_", ".", "_").Replace(prefix))
	rest, ok := strings.CutPrefix(internal, p)
	if !ok || !reversedNameRE.MatchString(rest) {
		return "", false
	}
	return strings.ReplaceAll(rest, "_", "-"), true
}

func collapseUnderscores(s string) string {
	for strings.Contains(s, "__") {
		s = strings.ReplaceAll(s, "__", "_")
	}
	return s
}

// qtreePoolPrefix is the name prefix of ontap-nas-economy's FlexVols:
// "trident_qtree_pool_<storagePrefix>_", '-' made '_', then "__" made "_"
// in one pass (Trident's Initialize).
func qtreePoolPrefix(storagePrefix string) string {
	p := strings.ReplaceAll("trident_qtree_pool_"+storagePrefix+"_", "-", "_")
	return strings.ReplaceAll(p, "__", "_")
}

// lunPoolPrefix is the name prefix of ontap-san-economy's FlexVols:
// "trident_lun_pool_<storagePrefix>_", "__" made "_" in one pass.
func lunPoolPrefix(storagePrefix string) string {
	return strings.ReplaceAll("trident_lun_pool_"+storagePrefix+"_", "__", "_")
}

// poolName is the n-th candidate name of a new pool FlexVol for one set of
// attributes. Trident draws the ten letters at random; deriving them from
// the SVM, the prefix, the attributes and n makes two controllers that
// need a new pool at once pick the same name, so one of them finds it
// taken and uses it (docs/design/economy.md §4.3).
func poolName(prefix, seed string, n int) string {
	sum := sha256.Sum256([]byte(seed + "#" + strconv.Itoa(n)))
	b := make([]byte, poolSuffixLen)
	for i := range b {
		b[i] = 'A' + sum[i]%26
	}
	return prefix + string(b)
}

// isPoolName reports whether name is a pool of prefix: the prefix and ten
// upper-case letters, as Trident makes them.
func isPoolName(prefix, name string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok || len(rest) != poolSuffixLen {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if rest[i] < 'A' || rest[i] > 'Z' {
			return false
		}
	}
	return true
}

// Snapshot LUNs of ontap-san-economy are LUN clones in the volume's
// FlexVol named "<lun>_snapshot_<snapshot>", '-' made '_' in both parts
// (Trident's LUNHelper.GetSnapshotName).
const lunSnapshotSeparator = "_snapshot_"

// lunSnapshotName is the snapshot LUN of a volume's LUN; a snapshot name
// the mapping cannot carry into a LUN name gets a hashed one.
func lunSnapshotName(lun, snapshot string) string {
	n := strings.ReplaceAll(lun, "-", "_") + lunSnapshotSeparator + strings.ReplaceAll(snapshot, "-", "_")
	if len(n) <= maxLUNName && lunNameRE.MatchString(n) {
		return n
	}
	keep := maxLUNName - len(lunSnapshotSeparator) - len("x__") - 32
	l := lun
	if len(l) > keep {
		l = l[:keep]
	}
	return l + lunSnapshotSeparator + "x__" + hashSuffix(lun + "/" + snapshot)[:16] + hashSuffix("2:" + lun + "/" + snapshot)[:16]
}

// lunNameRE: the characters ONTAP takes in a LUN name.
var lunNameRE = regexp.MustCompile(`^[A-Za-z0-9\-._{}]+$`)

// tridentSnapshotRE: the part of a Trident snapshot LUN's name after the
// separator, for the usual snapshot name "snapshot-<uuid>".
var tridentSnapshotRE = regexp.MustCompile(`^snapshot_([0-9a-f]{8})_([0-9a-f]{4})_([0-9a-f]{4})_([0-9a-f]{4})_([0-9a-f]{12})$`)

// splitSnapshotLUN splits a snapshot LUN name into the volume's LUN name
// and the snapshot name Trident gave it (recovering "snapshot-<uuid>").
// ok is false for LUNs that are not snapshots.
func splitSnapshotLUN(name string) (lun, snapshot string, ok bool) {
	i := strings.Index(name, lunSnapshotSeparator)
	if i <= 0 || i+len(lunSnapshotSeparator) == len(name) {
		return "", "", false
	}
	lun, snapshot = name[:i], name[i+len(lunSnapshotSeparator):]
	if m := tridentSnapshotRE.FindStringSubmatch(snapshot); m != nil {
		snapshot = "snapshot-" + strings.Join(m[1:], "-")
	}
	return lun, snapshot, true
}
