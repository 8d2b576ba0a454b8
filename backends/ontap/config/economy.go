package config

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The economy drivers keep many volumes in each FlexVol: qtrees
// (ontap-nas-economy) or LUNs (ontap-san-economy) in pools of FlexVols the
// driver creates and deletes (docs/design/economy.md §5).
const (
	DriverONTAPNASEconomy = "ontap-nas-economy"
	DriverONTAPSANEconomy = "ontap-san-economy"
)

// Economy holds the keys of the economy drivers, with Trident 26.06's
// defaults and bounds.
type Economy struct {
	// QtreesPerFlexvol (ontap-nas-economy) caps the qtrees of one FlexVol:
	// 50..300, default 200.
	QtreesPerFlexvol int
	// LUNsPerFlexvol (ontap-san-economy) caps the LUNs of one FlexVol,
	// snapshot LUNs not counted: 50..200, default 100.
	LUNsPerFlexvol int
	// LimitVolumePoolSize caps a FlexVol's size in bytes (0: none).
	LimitVolumePoolSize int64
	// DenyNewVolumePools forbids creating FlexVols: volumes go only into
	// existing ones.
	DenyNewVolumePools bool
	// EmptyFlexvolDeferredDeletePeriod is how long an ontap-nas-economy
	// FlexVol stays after its last qtree went (default 8 h; 0 deletes it at
	// once). ontap-san-economy deletes an empty FlexVol at once, as Trident.
	EmptyFlexvolDeferredDeletePeriod time.Duration
	// PruneFlexvolsPeriod (qtreePruneFlexvolsPeriod) is how often empty
	// FlexVols are looked for, at most (default 10 min).
	PruneFlexvolsPeriod time.Duration
}

// Trident 26.06's bounds and defaults (ontap_nas_qtree.go,
// ontap_san_economy.go).
const (
	minQtreesPerFlexvol     = 50
	defaultQtreesPerFlexvol = 200
	maxQtreesPerFlexvol     = 300
	minLUNsPerFlexvol       = 50
	defaultLUNsPerFlexvol   = 100
	maxLUNsPerFlexvol       = 200

	defaultEmptyFlexvolDeletePeriod = 8 * time.Hour
	defaultPruneFlexvolsPeriod      = 10 * time.Minute
)

// economyKeys are the top-level keys the economy drivers read.
var economyKeys = []string{
	"qtreesPerFlexvol", "lunsPerFlexvol", "limitVolumePoolSize", "denyNewVolumePools",
	"emptyFlexvolDeferredDeletePeriod", "qtreePruneFlexvolsPeriod", "qtreeQuotaResizePeriod",
}

// IsEconomy reports whether the config is for an economy driver.
func (c *Backend) IsEconomy() bool {
	return c.StorageDriverName == DriverONTAPNASEconomy || c.StorageDriverName == DriverONTAPSANEconomy
}

// IsSAN reports whether the config's volumes are LUNs (ontap-san and
// ontap-san-economy).
func (c *Backend) IsSAN() bool { return c.san() }

// supportedDriver reports whether name is a driver this package parses.
func supportedDriver(name string) bool {
	switch name {
	case DriverONTAPNAS, DriverONTAPSAN, DriverONTAPNASEconomy, DriverONTAPSANEconomy:
		return true
	}
	return false
}

var supportedDrivers = strings.Join([]string{DriverONTAPNAS, DriverONTAPSAN, DriverONTAPNASEconomy, DriverONTAPSANEconomy}, ", ")

// Economy pool names keep the storage prefix (Trident:
// "trident_qtree_pool_<prefix>_", "trident_lun_pool_<prefix>_"), with '-'
// made '_' for qtree pools only; ONTAP refuses other characters in volume
// names. Trident lets such prefixes through and then fails every create.
var (
	nasEconomyPrefixRE = regexp.MustCompile(`^[A-Za-z0-9_-]*$`)
	sanEconomyPrefixRE = regexp.MustCompile(`^[A-Za-z0-9_]*$`)
)

// economyPrefix checks the storage prefix of an economy driver.
func (p *parser) economyPrefix(cfg *Backend) {
	switch {
	case cfg.StorageDriverName == DriverONTAPNASEconomy && !nasEconomyPrefixRE.MatchString(cfg.StoragePrefix):
		p.fail("storagePrefix", "%q: ontap-nas-economy puts the prefix into FlexVol names, which take only letters, digits, '_' and '-' (made '_')", cfg.StoragePrefix)
	case cfg.StorageDriverName == DriverONTAPSANEconomy && !sanEconomyPrefixRE.MatchString(cfg.StoragePrefix):
		p.fail("storagePrefix", "%q: ontap-san-economy puts the prefix into FlexVol names as it is, which take only letters, digits and '_'", cfg.StoragePrefix)
	}
}

// economy reads the economy keys; other drivers ignore them, as Trident's
// do.
func (p *parser) economy(cfg *Backend, top map[string]json.RawMessage) {
	if !cfg.IsEconomy() {
		for _, k := range economyKeys {
			if raw, ok := top[k]; ok && !isNull(raw) {
				p.warn("%s has no effect on %s", k, cfg.StorageDriverName)
			}
		}
		return
	}
	e := &Economy{QtreesPerFlexvol: defaultQtreesPerFlexvol, LUNsPerFlexvol: defaultLUNsPerFlexvol}
	if cfg.StorageDriverName == DriverONTAPNASEconomy {
		e.QtreesPerFlexvol = p.boundedInt(top, "qtreesPerFlexvol", defaultQtreesPerFlexvol, minQtreesPerFlexvol, maxQtreesPerFlexvol)
	} else {
		e.LUNsPerFlexvol = p.boundedInt(top, "lunsPerFlexvol", defaultLUNsPerFlexvol, minLUNsPerFlexvol, maxLUNsPerFlexvol)
	}
	if v := strings.TrimSpace(p.str("limitVolumePoolSize", top["limitVolumePoolSize"])); v != "" {
		n, err := parseSize(v)
		if err != nil || n <= 0 {
			p.fail("limitVolumePoolSize", "%q is not a size above zero (e.g. 5Ti)", v)
		}
		e.LimitVolumePoolSize = n
	}
	if v := strings.TrimSpace(p.str("denyNewVolumePools", top["denyNewVolumePools"])); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			p.warn("denyNewVolumePools: %q is not a boolean; new FlexVols are allowed, as Trident does", v)
		}
		e.DenyNewVolumePools = b
	}
	e.EmptyFlexvolDeferredDeletePeriod = p.seconds(top, "emptyFlexvolDeferredDeletePeriod", defaultEmptyFlexvolDeletePeriod)
	e.PruneFlexvolsPeriod = p.seconds(top, "qtreePruneFlexvolsPeriod", defaultPruneFlexvolsPeriod)
	if cfg.StorageDriverName == DriverONTAPSANEconomy {
		for _, k := range []string{"emptyFlexvolDeferredDeletePeriod", "qtreePruneFlexvolsPeriod"} {
			if raw, ok := top[k]; ok && !isNull(raw) {
				p.warn("%s has no effect on ontap-san-economy: a FlexVol goes with its last LUN, as in Trident", k)
			}
		}
	}
	if raw, ok := top["qtreeQuotaResizePeriod"]; ok && !isNull(raw) {
		p.warn("qtreeQuotaResizePeriod has no effect: over REST, ONTAP resizes quotas when a rule changes")
	}
	cfg.Economy = e
}

// boundedInt reads an integer key (Trident takes it as a string) within
// [lo, hi], def when absent.
func (p *parser) boundedInt(top map[string]json.RawMessage, key string, def, lo, hi int) int {
	v := strings.TrimSpace(p.str(key, top[key]))
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	switch {
	case err != nil:
		p.fail(key, "%q is not an integer", v)
	case n < lo || n > hi:
		p.fail(key, "%d is outside %d..%d", n, lo, hi)
	}
	return n
}

// seconds reads a duration in whole seconds (Trident takes a string); a
// value Trident would reject falls back to def with a warning, as there.
func (p *parser) seconds(top map[string]json.RawMessage, key string, def time.Duration) time.Duration {
	v := strings.TrimSpace(p.str(key, top[key]))
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > int64(100*365*24*3600) {
		p.warn("%s: %q is not a number of seconds; using %v, as Trident does", key, v, def)
		return def
	}
	return time.Duration(n) * time.Second
}
