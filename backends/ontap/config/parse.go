package config

import (
	"bytes"
	"cmp"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/ontap-csi/ontap-csi/backends/ontap/internal/lif"
)

// storagePrefixRE: ONTAP volume names take letters, digits and "_"; Trident
// turns "-" and "." into "_" when it builds names.
var storagePrefixRE = regexp.MustCompile(`^[A-Za-z_.-][A-Za-z0-9_.-]*$`)

// parse reads a backend config section by section, in the order the
// problems are reported.
func (p *parser) parse(source string, data []byte, dir string) *Backend {
	cfg := &Backend{Source: source}
	top, ok := p.topLevel(data)
	if !ok {
		return cfg
	}
	p.version(cfg, top)
	p.driverName(cfg, top)
	p.addresses(cfg, top)
	p.credentialsAndTLS(cfg, top, dir)
	p.storagePrefix(cfg, top["storagePrefix"])
	p.economy(cfg, top)
	p.limits(cfg, top)
	p.exports(cfg, top)
	p.tridentOnly(cfg, top)
	p.userState(cfg, top["userState"])
	p.aws(cfg, top)
	backendDefaults := p.placement(cfg, top)
	p.virtualPools(cfg, top["storage"], backendDefaults)
	return cfg
}

// topLevel decodes the config (JSON or YAML) into its top-level keys.
func (p *parser) topLevel(data []byte) (map[string]json.RawMessage, bool) {
	js, err := toJSON(data)
	if err != nil {
		p.fail("", "is neither valid JSON nor valid YAML: %v", err)
		return nil, false
	}
	if isNull(js) {
		p.fail("", "is empty")
		return nil, false
	}
	return p.object("", js, topKeys), true
}

func (p *parser) version(cfg *Backend, top map[string]json.RawMessage) {
	if raw, ok := top["version"]; !ok || isNull(raw) {
		p.fail("version", "is required and must be 1")
	} else if err := json.Unmarshal(raw, &cfg.Version); err != nil || cfg.Version != 1 {
		p.fail("version", "must be the number 1, not %s", strings.TrimSpace(string(raw)))
	}
}

func (p *parser) driverName(cfg *Backend, top map[string]json.RawMessage) {
	cfg.StorageDriverName = p.str("storageDriverName", top["storageDriverName"])
	p.driver = cfg.StorageDriverName
	switch {
	case supportedDriver(cfg.StorageDriverName):
	case cfg.StorageDriverName == "":
		p.fail("storageDriverName", "is required (%s)", supportedDrivers)
	default:
		p.fail("storageDriverName", "%q is not supported (supported: %s)", cfg.StorageDriverName, supportedDrivers)
	}
}

// san reports whether the config is for ontap-san.
func (c *Backend) san() bool {
	return c.StorageDriverName == DriverONTAPSAN || c.StorageDriverName == DriverONTAPSANEconomy
}

// addresses reads the LIFs and the SVM, and names the backend after its
// driver and LIF when the config does not, as Trident does.
func (p *parser) addresses(cfg *Backend, top map[string]json.RawMessage) {
	cfg.ManagementLIF = strings.TrimSpace(p.str("managementLIF", top["managementLIF"]))
	if cfg.ManagementLIF == "" {
		p.fail("managementLIF", "is required%s", fsxHint(top))
	} else if _, err := lif.HostPort(cfg.ManagementLIF); err != nil {
		p.fail("managementLIF", "%s", err)
	}
	cfg.DataLIF = strings.TrimSpace(p.str("dataLIF", top["dataLIF"]))
	if cfg.DataLIF != "" {
		host := strings.TrimSuffix(strings.TrimPrefix(cfg.DataLIF, "["), "]")
		if net.ParseIP(host) == nil && (!lif.ValidHostname(host) || dottedNumbersRE.MatchString(host)) {
			p.fail("dataLIF", "%q is neither an IP address nor a host name", cfg.DataLIF)
		} else if cfg.san() {
			p.warn("dataLIF is ignored by ontap-san: all iSCSI LIFs of the SVM are used")
		}
	}
	cfg.SVM = strings.TrimSpace(p.str("svm", top["svm"]))
	if cfg.SVM == "" {
		p.fail("svm", "is required%s", fsxHint(top))
	} else {
		p.ontapName("svm", "an SVM", cfg.SVM)
	}
	cfg.BackendName = p.str("backendName", top["backendName"])
	if cfg.BackendName == "" && cfg.StorageDriverName != "" {
		cfg.BackendName = strings.ReplaceAll(cfg.StorageDriverName, "-", "") + "_" + cmp.Or(cfg.DataLIF, cfg.ManagementLIF)
	}
}

// credentialsAndTLS reads the credentials (from the config or a
// credentials file), the certificates and the CHAP settings.
func (p *parser) credentialsAndTLS(cfg *Backend, top map[string]json.RawMessage, dir string) {
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
		p.chap(cfg, cfg.san())
	}
}

func (p *parser) storagePrefix(cfg *Backend, raw json.RawMessage) {
	switch {
	case isNull(raw) || string(bytes.TrimSpace(raw)) == "{}":
		// Trident: absent, null or {} mean "use the default".
		cfg.StoragePrefix = defaultStoragePrefix
	case jsonKind(raw) != "a string":
		p.fail("storagePrefix", "must be a string, not %s", jsonKind(raw))
	default:
		cfg.StoragePrefix = p.str("storagePrefix", raw)
		if cfg.IsEconomy() {
			p.economyPrefix(cfg)
		} else if cfg.StoragePrefix != "" && !storagePrefixRE.MatchString(cfg.StoragePrefix) {
			p.fail("storagePrefix", "%q may hold only letters, digits, '_', '-' and '.', and must not start with a digit", cfg.StoragePrefix)
		} else if len(cfg.StoragePrefix) > 64 {
			p.fail("storagePrefix", "is longer than 64 characters")
		}
	}
}

// limits reads the aggregate and the limits on its usage and on volume
// sizes.
func (p *parser) limits(cfg *Backend, top map[string]json.RawMessage) {
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
}

// exports reads the NFS settings: mount options and automatic export
// policies.
func (p *parser) exports(cfg *Backend, top map[string]json.RawMessage) {
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
	if cfg.san() && cfg.AutoExportPolicy {
		p.warn("autoExportPolicy is ignored by ontap-san")
	}
}

// tridentOnly reads keys whose Trident meaning this driver narrows: a
// shared igroup, ZAPI, and protocols other than NFS and iSCSI.
func (p *parser) tridentOnly(cfg *Backend, top map[string]json.RawMessage) {
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
}

// placement reads the backend's labels, topologies and volume defaults,
// and returns the raw defaults its virtual pools inherit.
func (p *parser) placement(cfg *Backend, top map[string]json.RawMessage) map[string]setting {
	cfg.Labels = p.labels("labels", top["labels"])
	cfg.Region = p.str("region", top["region"])
	cfg.Zone = p.str("zone", top["zone"])
	cfg.SupportedTopologies = p.topologies("supportedTopologies", top["supportedTopologies"])
	cfg.UseBalancedPlacement = p.balancedPlacement(cfg, "useBalancedPlacement", top["useBalancedPlacement"], false)
	backendDefaults := p.rawDefaults("defaults", top["defaults"], nil)
	cfg.Defaults = p.volumeDefaults(backendDefaults)
	return backendDefaults
}

// virtualPools reads "storage": each pool's settings laid over the
// backend's.
func (p *parser) virtualPools(cfg *Backend, raw json.RawMessage, backendDefaults map[string]setting) {
	if isNull(raw) {
		return
	}
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
			Region:              cmp.Or(p.str(path+".region", pm["region"]), cfg.Region),
			Zone:                cmp.Or(p.str(path+".zone", pm["zone"]), cfg.Zone),
			SupportedTopologies: p.topologies(path+".supportedTopologies", pm["supportedTopologies"]),
			UseBalancedPlacement: p.balancedPlacement(cfg, path+".useBalancedPlacement", pm["useBalancedPlacement"],
				cfg.UseBalancedPlacement),
		}
		if pool.SupportedTopologies == nil {
			pool.SupportedTopologies = cfg.SupportedTopologies
		}
		p.protocolTypes(path, pm)
		pool.Defaults = p.volumeDefaults(p.rawDefaults(path+".defaults", pm["defaults"], backendDefaults))
		cfg.Storage = append(cfg.Storage, pool)
	}
}

// balancedPlacement reads a useBalancedPlacement (Trident types it as a
// string); unset is inherit. ONTAP then picks the aggregate, so a
// configured aggregate contradicts it, as in Trident.
func (p *parser) balancedPlacement(cfg *Backend, key string, raw json.RawMessage, inherit bool) bool {
	v := strings.TrimSpace(p.str(key, raw))
	if v == "" {
		return inherit
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.fail(key, "%q is not a boolean", v)
	}
	if b && cfg.Aggregate != "" {
		p.fail(key, "balanced placement lets ONTAP choose the aggregate; it may not be used with aggregate %q", cfg.Aggregate)
	}
	return b
}

// userState reads Trident's userState: a suspended backend takes no new
// volumes.
func (p *parser) userState(cfg *Backend, raw json.RawMessage) {
	switch v := strings.ToLower(strings.TrimSpace(p.str("userState", raw))); v {
	case "", UserStateNormal:
		cfg.UserState = UserStateNormal
	case UserStateSuspended:
		cfg.UserState = v
	default:
		p.fail("userState", "%q is neither %s nor %s", v, UserStateNormal, UserStateSuspended)
	}
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
	if strings.EqualFold(p.str("credentials.type", m["type"]), "awsarn") {
		p.fail("credentials.type", "awsarn (AWS Secrets Manager) is not supported: %s", noAWSAPI)
		return
	}
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
