package controller

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
)

// parameters are the StorageClass parameters Trident honours, parsed.
// Placement keys choose backends and pools; the rest become VolumeOptions.
type parameters struct {
	backendType      string
	storagePools     poolList // nil: every pool
	additionalPools  poolList
	excludePools     poolList
	selector         labels.Selector // nil: no label constraint
	media            string
	provisioningType string
	region, zone     string
	// iops is set by Trident's IOPS attribute, which no ONTAP pool offers.
	iops bool
	// wantSnapshots, wantClones: the StorageClass asked for "true".
	wantSnapshots, wantClones bool
	// protocol restricts placement to backends of one protocol (the
	// claim's trident.netapp.io/protocol); "" any.
	protocol backends.Protocol
	options  backends.VolumeOptions
	// mutable are the CreateVolume's mutable parameters (a
	// VolumeAttributesClass), also laid over options.
	mutable *backends.Modify
	// claim is what csi-provisioner's metadata, then the claim itself,
	// tell of the claim (for a nameTemplate).
	claim backends.Claim
}

// tridentPrefix marks Trident's PVC-annotation spelling of a parameter
// (trident.netapp.io/snapshotPolicy); both spellings are accepted.
const tridentPrefix = "trident.netapp.io/"

// parseParameters validates a StorageClass's parameters. Unknown keys are
// refused, as Trident refuses a StorageClass with unknown attributes,
// except the CO's own csi.storage.k8s.io/ keys.
func parseParameters(params map[string]string) (*parameters, error) {
	p := &parameters{claim: backends.Claim{Name: params[paramPVCName], Namespace: params[paramPVCNamespace]}}
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		raw := params[key]
		v := strings.TrimSpace(raw)
		k := strings.TrimPrefix(key, tridentPrefix)
		known, err := p.setPlacement(k, v)
		if !known {
			known, err = p.setOption(k, v)
		}
		if !known {
			if strings.HasPrefix(key, "csi.storage.k8s.io/") {
				continue // the CO's metadata (PVC name, namespace)
			}
			return nil, invalidArg("StorageClass parameter %q is not supported", key)
		}
		if err != nil {
			return nil, invalidArg("StorageClass parameter %s=%q: %v", key, raw, err)
		}
	}
	return p, nil
}

// setPlacement applies a parameter that chooses backends and pools, or
// that only has to be valid; known is false for any other key.
func (p *parameters) setPlacement(k, v string) (known bool, err error) {
	switch k {
	case "backendType":
		p.backendType = v
	case "storagePools":
		p.storagePools, err = parsePoolList(v)
	case "additionalStoragePools", "requiredStorage":
		var l poolList
		l, err = parsePoolList(v)
		p.additionalPools = append(p.additionalPools, l...)
	case "excludeStoragePools":
		p.excludePools, err = parsePoolList(v)
	case "selector":
		// Trident separates requirements with ';'.
		p.selector, err = labels.Parse(strings.ReplaceAll(v, ";", ","))
	case "media":
		err = oneOf(v, "hdd", "ssd", "hybrid")
		p.media = v
	case "provisioningType":
		err = oneOf(v, "thin", "thick")
		p.provisioningType = v
		p.options.SpaceReserve = map[string]string{"thin": "none", "thick": "volume"}[v]
	case "snapshots", "clones":
		// "true" needs a pool that offers them; "false" matches every
		// pool, as Trident's bool offers do.
		var want bool
		want, err = strconv.ParseBool(v)
		if k == "snapshots" {
			p.wantSnapshots = want
		} else {
			p.wantClones = want
		}
	case "nasType":
		err = oneOf(strings.ToLower(v), "nfs")
	case "sanType":
		err = oneOf(strings.ToLower(v), "iscsi")
	case "region":
		p.region = v
	case "zone":
		p.zone = v
	case "IOPS":
		// Trident parses it as an integer attribute request; only its
		// SolidFire pools offer IOPS, so it matches no ONTAP pool (QoS on
		// ONTAP comes from qosPolicy).
		_, err = strconv.Atoi(v)
		p.iops = true
	case "fsType", "fstype":
		// The CO turns it into the capability's fs_type.
	default:
		return false, nil
	}
	return true, err
}

// setOption applies a parameter that becomes a VolumeOption; known is false
// for any other key.
func (p *parameters) setOption(k, v string) (known bool, err error) {
	o := &p.options
	switch k {
	case "encryption":
		o.Encryption, err = parseBoolPtr(v)
	case "snapshotPolicy":
		o.SnapshotPolicy = v
	case "snapshotReserve":
		var n int
		n, err = parseReserve(v)
		o.SnapshotReserve = &n
	case "snapshotDirectory", "snapshotDir":
		o.SnapshotDir, err = parseBoolPtr(v)
	case "unixPermissions":
		_, err = config.ParseUnixPermissions(v)
		o.UnixPermissions = v
	case "exportPolicy":
		err = config.CheckExportPolicyName(v)
		o.ExportPolicy = v
	case "securityStyle":
		err = oneOf(v, "unix", "mixed", "ntfs")
		o.SecurityStyle = v
	case "splitOnClone":
		o.SplitOnClone, err = parseBoolPtr(v)
	case "tieringPolicy":
		o.TieringPolicy, err = config.ParseTieringPolicy(v)
	case "qosPolicy":
		o.QoSPolicy = v
	default:
		return false, nil
	}
	return true, err
}

func oneOf(v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return fmt.Errorf("want one of %s", strings.Join(allowed, ", "))
}

func parseBoolPtr(v string) (*bool, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return nil, fmt.Errorf("not a boolean")
	}
	return &b, nil
}

// poolList is Trident's "backend:pool1,pool2;backend2:pool3" where each
// name is a regular expression matched against the whole name.
type poolList []poolPattern

type poolPattern struct {
	backend *regexp.Regexp
	pools   []*regexp.Regexp
}

func parsePoolList(v string) (poolList, error) {
	var out poolList
	for _, entry := range strings.Split(v, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		backend, pools, ok := strings.Cut(entry, ":")
		if !ok {
			return nil, fmt.Errorf("%q: want backend:pool[,pool...]", entry)
		}
		be, err := anchored(backend)
		if err != nil {
			return nil, err
		}
		pp := poolPattern{backend: be}
		for _, pool := range strings.Split(pools, ",") {
			re, err := anchored(pool)
			if err != nil {
				return nil, err
			}
			pp.pools = append(pp.pools, re)
		}
		out = append(out, pp)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no backend:pool entry")
	}
	return out, nil
}

func anchored(expr string) (*regexp.Regexp, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, fmt.Errorf("empty name")
	}
	re, err := regexp.Compile("^(?:" + expr + ")$")
	if err != nil {
		return nil, fmt.Errorf("%q is not a valid regular expression", expr)
	}
	return re, nil
}

func (l poolList) matches(backend, pool string) bool {
	for _, p := range l {
		if !p.backend.MatchString(backend) {
			continue
		}
		for _, re := range p.pools {
			if re.MatchString(pool) {
				return true
			}
		}
	}
	return false
}
