package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeUnits maps Trident's size suffixes to multipliers. As in Trident, the
// single letters and the "i" forms are binary ("100G" is 100 GiB, unlike a
// Kubernetes quantity), the "B" forms are decimal ("100GB" is 10^11), and a
// plain number is bytes.
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	// Longest suffixes first, so "gib" is not read as "b".
	{"bytes", 1},
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40}, {"pib", 1 << 50}, {"eib", 1 << 60},
	{"ki", 1 << 10}, {"mi", 1 << 20}, {"gi", 1 << 30}, {"ti", 1 << 40}, {"pi", 1 << 50}, {"ei", 1 << 60},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12}, {"pb", 1e15}, {"eb", 1e18},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40}, {"p", 1 << 50}, {"e", 1 << 60},
	{"b", 1},
}

// parseSize parses a size the way Trident does: "1Gi", "1G" and "1GiB" are
// GiB, "1GB" is 10^9 bytes, "20MiB", "512k", and a plain integer is bytes.
// Only whole numbers are accepted.
func parseSize(s string) (int64, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(v, u.suffix) {
			v, mult = strings.TrimSpace(strings.TrimSuffix(v, u.suffix)), u.mult
			break
		}
	}
	if v == "" || strings.ContainsAny(v, "+-") {
		return 0, fmt.Errorf("%q is not a size (e.g. 1Gi, 100G, 20MiB, 1073741824)", s)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size (e.g. 1Gi, 100G, 20MiB, 1073741824)", s)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return n * mult, nil
}

// sizeHasUnit reports whether s ends in one of parseSize's suffixes.
func sizeHasUnit(s string) bool {
	v := strings.ToLower(strings.TrimSpace(s))
	for _, u := range sizeUnits {
		if strings.HasSuffix(v, u.suffix) {
			return true
		}
	}
	return false
}
