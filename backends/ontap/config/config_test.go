package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const nasJSON = `{
  "version": 1,
  "storageDriverName": "ontap-nas",
  "backendName": "nas-a",
  "managementLIF": "10.0.0.1",
  "dataLIF": "10.0.0.2",
  "svm": "svm_nfs",
  "username": "vsadmin",
  "password": "pa55-word-xyz",
  "trustedCACertificate": "%s",
  "aggregate": "aggr1",
  "limitAggregateUsage": "80%%",
  "limitVolumeSize": "50Gi",
  "nfsMountOptions": "nfsvers=4.1",
  "autoExportPolicy": true,
  "autoExportCIDRs": ["10.0.0.0/8", "fd00::/8"],
  "labels": {"cost": "100", "tier": "gold"},
  "region": "eu",
  "zone": "eu-1",
  "defaults": {
    "spaceReserve": "volume",
    "snapshotPolicy": "default",
    "snapshotReserve": "10",
    "snapshotDir": "true",
    "unixPermissions": "---rwxr-xr-x",
    "exportPolicy": "myexports",
    "securityStyle": "mixed",
    "splitOnClone": "true",
    "encryption": "false",
    "tieringPolicy": "snapshot-only",
    "qosPolicy": "gold",
    "size": "10"
  },
  "storage": [
    {"labels": {"tier": "silver"}, "zone": "eu-2", "defaults": {"spaceReserve": "none", "unixPermissions": "0700"}},
    {"defaults": {"snapshotPolicy": "none", "snapshotReserve": ""}}
  ]
}`

func testCA(t testing.TB) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestParseNASConfig(t *testing.T) {
	ca := testCA(t)
	data := fmt.Sprintf(nasJSON, base64.StdEncoding.EncodeToString(ca))
	cfg, err := Parse("nas.json", []byte(data), "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.StorageDriverName != DriverONTAPNAS || cfg.BackendName != "nas-a" || cfg.SVM != "svm_nfs" ||
		cfg.Password != "pa55-word-xyz" || string(cfg.TrustedCACertificate) != string(ca) ||
		cfg.LimitAggregateUsage != 80 || cfg.LimitVolumeSize != 50<<30 || !cfg.AutoExportPolicy ||
		cfg.StoragePrefix != defaultStoragePrefix || cfg.NFSMountOptions != "nfsvers=4.1" {
		t.Fatalf("top level: %v", cfg)
	}
	wantCIDRs := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	if !reflect.DeepEqual(cfg.AutoExportCIDRs, wantCIDRs) {
		t.Errorf("CIDRs %v", cfg.AutoExportCIDRs)
	}
	wantDefaults := VolumeDefaults{
		Size: 10 << 30, SpaceReserve: "volume", SpaceAllocation: true, SnapshotPolicy: "default", SnapshotReserve: new(10),
		SnapshotDir: true, UnixPermissions: "755", ExportPolicy: "myexports", SecurityStyle: "mixed", SplitOnClone: true,
		FileSystemType: "ext4", Encryption: new(false), TieringPolicy: "snapshot_only", QoSPolicy: "gold",
	}
	if !reflect.DeepEqual(cfg.Defaults, wantDefaults) {
		t.Errorf("defaults\n got %+v\nwant %+v", cfg.Defaults, wantDefaults)
	}
	if len(cfg.Storage) != 2 {
		t.Fatalf("pools: %+v", cfg.Storage)
	}
	p0 := cfg.Storage[0]
	if p0.Name != "nas-a_pool_0" || p0.Zone != "eu-2" || p0.Region != "eu" ||
		!reflect.DeepEqual(p0.Labels, map[string]string{"cost": "100", "tier": "silver"}) ||
		p0.Defaults.SpaceReserve != "none" || p0.Defaults.UnixPermissions != "700" || p0.Defaults.QoSPolicy != "gold" {
		t.Errorf("pool 0: %+v", p0)
	}
	// A pool's "" inherits the backend's value, as in Trident.
	if p1 := cfg.Storage[1].Defaults; p1.SnapshotPolicy != "none" || p1.SnapshotReserve == nil || *p1.SnapshotReserve != 10 {
		t.Errorf("pool 1: %+v", p1)
	}
}

func TestParseSANConfigYAMLWithTridentDefaults(t *testing.T) {
	yamlCfg := `
version: 1
storageDriverName: ontap-san
managementLIF: "[fd00::10]:8443"
svm: svm_iscsi
username: admin
password: secret-1
insecureSkipTLSVerify: true
storagePrefix: ""
useCHAP: true
chapUsername: uname
chapInitiatorSecret: cl9qxIm36DKyawxy
chapTargetUsername: iJF4heBRT0TCwxyz
chapTargetInitiatorSecret: rqxigXgkesIpwxyz
defaults:
  snapshotReserve: 5
  spaceAllocation: false
  fileSystemType: XFS
`
	cfg, err := Parse("san.yaml", []byte(yamlCfg), "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.StorageDriverName != DriverONTAPSAN || cfg.StoragePrefix != "" || !cfg.UseCHAP || !cfg.InsecureSkipTLSVerify ||
		cfg.BackendName != "ontapsan_[fd00::10]:8443" || cfg.CHAPTargetInitiatorSecret != "rqxigXgkesIpwxyz" {
		t.Fatalf("%v", cfg)
	}
	d := cfg.Defaults
	want := VolumeDefaults{Size: 1 << 30, SpaceReserve: "none", SpaceAllocation: false, SnapshotPolicy: "none",
		SnapshotReserve: new(5), UnixPermissions: "777", ExportPolicy: "default", SecurityStyle: "unix",
		FileSystemType: "xfs"}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("defaults\n got %+v\nwant %+v", d, want)
	}
	if !reflect.DeepEqual(cfg.AutoExportCIDRs, defaultAutoExportCIDRs) {
		t.Errorf("CIDRs %v", cfg.AutoExportCIDRs)
	}
}

func minimal(extra string) string {
	return `{"version":1,"storageDriverName":"ontap-nas","managementLIF":"10.0.0.1","svm":"s","username":"u","password":"p"` + extra + `}`
}

func TestParseRejectsInvalidValuesNamingTheKey(t *testing.T) {
	tests := []struct {
		name, data, want string
	}{
		{"bad snapshot reserve", minimal(`,"defaults":{"snapshotReserve":"abc"}`), `backend config "t.json": defaults.snapshotReserve: "abc" is not a percentage`},
		{"reserve out of range", minimal(`,"defaults":{"snapshotReserve":"95"}`), `defaults.snapshotReserve: 95 is outside ONTAP's 0..90 percent`},
		{"version", strings.Replace(minimal(""), `"version":1`, `"version":2`, 1), `version: must be the number 1, not 2`},
		{"version string", strings.Replace(minimal(""), `"version":1`, `"version":"1"`, 1), `version: must be the number 1`},
		{"missing version", strings.Replace(minimal(""), `"version":1,`, ``, 1), `version: is required`},
		{"driver", strings.Replace(minimal(""), `ontap-nas`, `ontap-nas-flexgroup`, 1), `storageDriverName: "ontap-nas-flexgroup" is not supported`},
		{"typo", minimal(`,"managmentLIF":"x"`), `unknown key "managmentLIF" (did you mean "managementLIF"?)`},
		{"typo in defaults", minimal(`,"defaults":{"snapshotReserv":"5"}`), `defaults: unknown key "snapshotReserv" (did you mean "snapshotReserve"?)`},
		{"unknown far from anything", minimal(`,"flux":1`), `unknown key "flux"`},
		{"bool as string", minimal(`,"autoExportPolicy":"true"`), `autoExportPolicy: must be true or false, not a string (write it without quotes)`},
		{"bad cidr", minimal(`,"autoExportCIDRs":["10.0.0.0/33"]`), `autoExportCIDRs[0]: "10.0.0.0/33" is not a CIDR`},
		{"bad size", minimal(`,"defaults":{"size":"1.5Gi"}`), `defaults.size: "1.5Gi" is not a size`},
		{"bad limit size", minimal(`,"limitVolumeSize":"lots"`), `limitVolumeSize: "lots" is not a size`},
		{"bad limit usage", minimal(`,"limitAggregateUsage":"120%"`), `limitAggregateUsage: "120%" is not a percentage`},
		{"space reserve", minimal(`,"defaults":{"spaceReserve":"thick"}`), `defaults.spaceReserve: "thick" is not one of none, volume`},
		{"bool default", minimal(`,"defaults":{"splitOnClone":"maybe"}`), `defaults.splitOnClone: "maybe" is not a boolean`},
		{"perms", minimal(`,"defaults":{"unixPermissions":"0999"}`), `defaults.unixPermissions: "0999" is not unix permissions`},
		{"fs", minimal(`,"defaults":{"fileSystemType":"btrfs"}`), `defaults.fileSystemType: "btrfs" is not one of ext3, ext4, xfs`},
		{"tiering", minimal(`,"defaults":{"tieringPolicy":"sometimes"}`), `defaults.tieringPolicy: "sometimes" is not one of`},
		{"export policy", minimal(`,"defaults":{"exportPolicy":"my policy"}`), `defaults.exportPolicy: "my policy" is not an export policy name`},
		{"pool value", minimal(`,"storage":[{"defaults":{"snapshotReserve":"x"}}]`), `storage[0].defaults.snapshotReserve: "x" is not a percentage`},
		{"pool typo", minimal(`,"storage":[{"lables":{}}]`), `storage[0]: unknown key "lables" (did you mean "labels"?)`},
		{"prefix", minimal(`,"storagePrefix":"9bad"`), `storagePrefix: "9bad" may hold only`},
		{"prefix type", minimal(`,"storagePrefix":5`), `storagePrefix: must be a string, not a number`},
		{"management LIF", strings.Replace(minimal(""), `"10.0.0.1"`, `"https://10.0.0.1"`, 1), `managementLIF: management LIF "https://10.0.0.1" must be a host or host:port`},
		{"data LIF", minimal(`,"dataLIF":"not an ip!"`), `dataLIF: "not an ip!" is neither an IP address nor a host name`},
		{"data LIF digits", minimal(`,"dataLIF":"256.1.1.1"`), `dataLIF: "256.1.1.1" is neither an IP address nor a host name`},
		{"svm", strings.Replace(minimal(""), `"svm":"s"`, `"svm":"x y"`, 1), `svm: "x y" is not an SVM name`},
		{"snapshot policy", minimal(`,"defaults":{"snapshotPolicy":"bad policy name"}`), `defaults.snapshotPolicy: "bad policy name" is not a snapshot policy name`},
		{"qos policy", minimal(`,"storage":[{"defaults":{"qosPolicy":"gold, silver"}}]`), `storage[0].defaults.qosPolicy: "gold, silver" is not a QoS policy group name`},
		{"empty label name", minimal(`,"labels":{"":"x"}`), `labels: has a label with an empty name`},
		{"empty pool label name", minimal(`,"storage":[{"labels":{"":"x"}}]`), `storage[0].labels: has a label with an empty name`},
		{"empty topology value", minimal(`,"supportedTopologies":[{"topology.kubernetes.io/zone":""}]`), `supportedTopologies[0].topology.kubernetes.io/zone: is empty`},
		{"topology key", minimal(`,"supportedTopologies":[{"zone=a":"b"}]`), `supportedTopologies[0]: "zone=a" is not a label key`},
		{"topology value", minimal(`,"storage":[{"supportedTopologies":[{"zone":"a;b"}]}]`), `storage[0].supportedTopologies[0].zone: "a;b" is not a label value`},
		{"no credentials", strings.Replace(minimal(""), `"password":"p"`, `"password":""`, 1), `username: username and password, or clientCertificate and clientPrivateKey, are required`},
		{"cert without key", minimal(`,"clientCertificate":"Zm9v"`), `clientCertificate and clientPrivateKey must be given together`},
		{"bad base64", minimal(`,"trustedCACertificate":"***"`), `trustedCACertificate: is neither base64-encoded PEM nor PEM`},
		{"chap missing", strings.Replace(minimal(`,"useCHAP":true,"chapUsername":"u"`), "ontap-nas", "ontap-san", 1), `chapInitiatorSecret: is required when useCHAP is true`},
		{"chap equal secrets", strings.Replace(minimal(`,"useCHAP":true,"chapUsername":"u","chapTargetUsername":"t","chapInitiatorSecret":"same-secret","chapTargetInitiatorSecret":"same-secret"`), "ontap-nas", "ontap-san", 1), `chapTargetInitiatorSecret: must differ`},
		{"luks", minimal(`,"defaults":{"LUKSEncryption":"true"}`), `defaults.LUKSEncryption: LUKS encryption is not supported`},
		{"both QoS kinds", minimal(`,"defaults":{"qosPolicy":"gold"},"storage":[{"defaults":{"adaptiveQosPolicy":"ag"}}]`), `storage[0].defaults.adaptiveQosPolicy: only one of defaults.qosPolicy and adaptiveQosPolicy may be given`},
		{"balanced placement and aggregate", minimal(`,"aggregate":"aggr1","storage":[{"useBalancedPlacement":"true"}]`), `storage[0].useBalancedPlacement: balanced placement lets ONTAP choose the aggregate`},
		{"balanced placement value", minimal(`,"useBalancedPlacement":"sometimes"`), `useBalancedPlacement: "sometimes" is not a boolean`},
		{"user state", minimal(`,"userState":"paused"`), `userState: "paused" is neither normal nor suspended`},
		{"fsx id", minimal(`,"aws":{"fsxFilesystemID":"vol-1"}`), `aws.fsxFilesystemID: "vol-1" is not an FSx file system ID`},
		{"fsx without LIF", strings.Replace(minimal(`,"aws":{"fsxFilesystemID":"fs-1"}`), `"managementLIF":"10.0.0.1",`, ``, 1), `managementLIF: is required (Trident looks it up in the FSx API`},
		{"aws typo", minimal(`,"aws":{"fsxFileSystemId":"fs-1","region":"x"}`), `aws: unknown key "region"`},
		{"awsarn", minimal(`,"credentials":{"name":"arn:aws:secretsmanager:us-east-1:1:secret:s","type":"awsarn"}`), `credentials.type: awsarn (AWS Secrets Manager) is not supported: ontap-csi calls no AWS API`},
		{"ARN as username", strings.Replace(minimal(""), `"username":"u"`, `"username":"arn:aws:secretsmanager:us-east-1:1:secret:s"`, 1), `username: is an AWS Secrets Manager ARN`},
		{"nas type", minimal(`,"nasType":"smb"`), `nasType: "smb" is not supported`},
		{"k8s secret", minimal(`,"credentials":{"name":"secret","type":"secret"}`), `credentials.name: Kubernetes Secrets are not read`},
		{"labels type", minimal(`,"labels":["a"]`), `labels: must be an object of strings, not a list`},
		{"not json or yaml", `{"version": 1,`, `is neither valid JSON nor valid YAML`},
		{"case duplicate", minimal(`,"SVM":"other"`), `svm: given more than once`},
		{"insecure and CA", minimal(`,"insecureSkipTLSVerify":true,"trustedCACertificate":"` + base64.StdEncoding.EncodeToString(testCA(t)) + `"`), `insecureSkipTLSVerify: contradicts trustedCACertificate`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.json", []byte(tt.data), "")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

func TestParseReportsAllProblems(t *testing.T) {
	_, err := Parse("t.json", []byte(minimal(`,"defaults":{"snapshotReserve":"x","snapshotDir":"y"},"storage":[{"zone":"z"}]`)), "")
	if err == nil || !strings.Contains(err.Error(), "defaults.snapshotReserve") || !strings.Contains(err.Error(), "defaults.snapshotDir") {
		t.Fatalf("err = %v", err)
	}
	// The inherited bad value is reported once, under the key that holds it.
	if strings.Count(err.Error(), "snapshotReserve") != 1 {
		t.Errorf("reported more than once: %v", err)
	}
}

func TestParseLenientTyping(t *testing.T) {
	cfg, err := Parse("t.yaml", []byte(`
version: 1
storageDriverName: ontap-nas
managementLIF: cluster.example.com
svm: s
username: u
password: 12345
labels: {cost: 100}
defaults: {snapshotReserve: 10, snapshotDir: true, size: 2Gi, encryption: yes}
`), "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Password != "12345" || cfg.Labels["cost"] != "100" || *cfg.Defaults.SnapshotReserve != 10 ||
		!cfg.Defaults.SnapshotDir || cfg.Defaults.Size != 2<<30 || cfg.Defaults.Encryption == nil || !*cfg.Defaults.Encryption {
		t.Fatalf("%v", cfg)
	}
	// Keys match case-insensitively, as with Trident's JSON decoding.
	if _, err := Parse("t.json", []byte(`{"Version":1,"STORAGEDRIVERNAME":"ontap-nas","managementlif":"h","SVM":"s","Username":"u","Password":"p"}`), ""); err != nil {
		t.Fatal(err)
	}
}

func TestParseWarnsOnKnownButUnimplementedKeys(t *testing.T) {
	cfg, err := Parse("t.json", []byte(minimal(`,"debug":true,"usageHeartbeat":"24","defaults":{"formatOptions":"-E nodiscard","nameTemplate":"{{.volume.Name}}"},"storage":[{},{}],"useREST":false,"igroupName":"trident"`)), "")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(cfg.Warnings, "\n")
	for _, want := range []string{"debug is accepted", "usageHeartbeat is accepted", "useREST: false is ignored",
		"igroupName is accepted", "defaults.formatOptions is accepted"} {
		if strings.Count(got, want) != 1 {
			t.Errorf("warnings %q hold %q %d times, want once", got, want, strings.Count(got, want))
		}
	}
}

// nameTemplate is parsed where it stands (defaults, or a virtual pool's
// defaults, which inherit the backend's); a syntax error refuses the
// config under its key path, as Trident refuses the backend.
func TestParseNameTemplate(t *testing.T) {
	const pvcTpl = "{{.volume.Namespace}}_{{.volume.RequestName}}"
	for _, tc := range []struct {
		name, driver, keys string
		backend, pool0     string // effective templates, "" for none
		pool1              string
		problem, warning   string
	}{
		{name: "backend", driver: DriverONTAPNAS, keys: `,"defaults":{"nameTemplate":"` + pvcTpl + `"},"storage":[{},{}]`,
			backend: pvcTpl + "_{{slice .volume.Name 4 9}}", pool0: pvcTpl + "_{{slice .volume.Name 4 9}}", pool1: pvcTpl + "_{{slice .volume.Name 4 9}}"},
		{name: "pool over backend", driver: DriverONTAPSAN, keys: `,"defaults":{"nameTemplate":"{{.volume.Name}}"},"storage":[{"defaults":{"nameTemplate":"p_{{.volume.Name}}"}},{}]`,
			backend: "{{.volume.Name}}", pool0: "p_{{.volume.Name}}", pool1: "{{.volume.Name}}"},
		{name: "pool only", driver: DriverONTAPNAS, keys: `,"storage":[{},{"defaults":{"nameTemplate":"{{.volume.Name}}"}}]`,
			pool1: "{{.volume.Name}}"},
		{name: "syntax error", driver: DriverONTAPNAS, keys: `,"storage":[{"defaults":{"nameTemplate":"{{.volume.Name"}}]`,
			problem: `storage[0].defaults.nameTemplate: "{{.volume.Name" is not a valid template`},
		{name: "unknown function", driver: DriverONTAPSAN, keys: `,"defaults":{"nameTemplate":"{{lower .volume.Name}}"}`,
			problem: `defaults.nameTemplate: "{{lower .volume.Name}}" is not a valid template`},
		{name: "unknown field", driver: DriverONTAPNAS, keys: `,"defaults":{"nameTemplate":"{{.volume.PVCName}}"}`,
			backend: "{{.volume.PVCName}}_{{slice .volume.Name 4 9}}", warning: "defaults.nameTemplate uses .volume.PVCName, which Trident's"},
		// The economy drivers name qtrees and LUNs with it, as Trident.
		{name: "nas-economy", driver: DriverONTAPNASEconomy, keys: `,"defaults":{"nameTemplate":"` + pvcTpl + `"},"storage":[{"defaults":{"nameTemplate":"q_{{.volume.Name}}"}}]`,
			backend: pvcTpl + "_{{slice .volume.Name 4 9}}", pool0: "q_{{.volume.Name}}"},
		{name: "san-economy", driver: DriverONTAPSANEconomy, keys: `,"defaults":{"nameTemplate":"` + pvcTpl + `"}`,
			backend: pvcTpl + "_{{slice .volume.Name 4 9}}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(minimal(tc.keys), `"ontap-nas"`, `"`+tc.driver+`"`, 1)
			cfg, err := Parse("t.json", []byte(doc), "")
			if tc.problem != "" {
				if err == nil || !strings.Contains(err.Error(), tc.problem) {
					t.Fatalf("error %v, want one with %q", err, tc.problem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			effective := func(d VolumeDefaults) string {
				if d.NameTemplate == nil {
					return ""
				}
				return d.NameTemplate.Effective()
			}
			if got := effective(cfg.Defaults); got != tc.backend {
				t.Errorf("defaults: %q, want %q", got, tc.backend)
			}
			for i, want := range []string{tc.pool0, tc.pool1} {
				if i < len(cfg.Storage) {
					if got := effective(cfg.Storage[i].Defaults); got != want {
						t.Errorf("storage[%d]: %q, want %q", i, got, want)
					}
				}
			}
			got := strings.Join(cfg.Warnings, "\n")
			if tc.warning != "" && strings.Count(got, tc.warning) != 1 || tc.warning == "" && strings.Contains(got, "nameTemplate") {
				t.Errorf("warnings %q, want %q once", got, tc.warning)
			}
		})
	}
}

func TestParseAdaptiveQoSAndUserStateAndFSx(t *testing.T) {
	cfg, err := Parse("t.json", []byte(minimal(`,"userState":"Suspended","aws":{"fsxFilesystemID":"fs-0123456789abcdef0","apiRegion":"eu-west-1"},"defaults":{"adaptiveQosPolicy":"extreme"},"storage":[{"defaults":{"adaptiveQosPolicy":""}},{"useBalancedPlacement":"true"}]`)), "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.UserState != UserStateSuspended || cfg.AWS == nil || cfg.AWS.FSxFilesystemID != "fs-0123456789abcdef0" || cfg.AWS.APIRegion != "eu-west-1" {
		t.Errorf("%v", cfg)
	}
	if cfg.Defaults.QoSPolicy != "extreme" || cfg.Storage[0].Defaults.QoSPolicy != "extreme" {
		t.Errorf("adaptive QoS: %+v", cfg.Defaults)
	}
	if cfg.UseBalancedPlacement || cfg.Storage[0].UseBalancedPlacement || !cfg.Storage[1].UseBalancedPlacement {
		t.Errorf("balanced placement: %v %+v", cfg.UseBalancedPlacement, cfg.Storage)
	}
	if !strings.Contains(strings.Join(cfg.Warnings, "\n"), "aws is accepted for Trident compatibility, but ontap-csi calls no AWS API") {
		t.Errorf("warnings %q", cfg.Warnings)
	}
}

func TestCredentialsFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "creds.yaml"), []byte("username: admin\npassword: from-file-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "backend.json")
	body := `{"version":1,"storageDriverName":"ontap-nas","managementLIF":"10.0.0.1","svm":"s","credentials":{"file":"creds.yaml"}}`
	if err := os.WriteFile(cfgPath, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Username != "admin" || cfg.Password != "from-file-pw" {
		t.Fatalf("%v", cfg)
	}
	// The same key in both places is an error, not a silent override.
	body = `{"version":1,"storageDriverName":"ontap-nas","managementLIF":"10.0.0.1","svm":"s","password":"x","username":"admin","credentials":{"file":"creds.yaml"}}`
	_ = os.WriteFile(cfgPath, []byte(body), 0o600)
	if _, err := Load(cfgPath); err == nil || !strings.Contains(err.Error(), "username: is given both") {
		t.Fatalf("err = %v", err)
	}
	body = `{"version":1,"storageDriverName":"ontap-nas","managementLIF":"10.0.0.1","svm":"s","credentials":{"file":"missing.json"}}`
	_ = os.WriteFile(cfgPath, []byte(body), 0o600)
	if _, err := Load(cfgPath); err == nil || !strings.Contains(err.Error(), "credentials.file") {
		t.Fatalf("err = %v", err)
	}
}

func TestConfigNeverShowsSecrets(t *testing.T) {
	data := strings.Replace(minimal(`,"useCHAP":true,"chapUsername":"u","chapTargetUsername":"t","chapInitiatorSecret":"init-secret-123","chapTargetInitiatorSecret":"target-secret-456"`),
		`"password":"p"`, `"password":"very-secret-password"`, 1)
	data = strings.Replace(data, "ontap-nas", "ontap-san", 1)
	cfg, err := Parse("t.json", []byte(data), "")
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	logger := slog.New(slog.NewTextHandler(&sb, nil))
	logger.Info("cfg", "config", cfg, "value", *cfg)
	js, _ := json.Marshal(cfg)
	out := fmt.Sprintf("%v %+v %#v %s %q %v", cfg, cfg, cfg, cfg, cfg.Password, *cfg) + sb.String() + string(js)
	for _, secret := range []string{"very-secret-password", "init-secret-123", "target-secret-456"} {
		if strings.Contains(out, secret) {
			t.Fatalf("secret %q shown in:\n%s", secret, out)
		}
	}
	if !strings.Contains(out, "<redacted>") {
		t.Fatalf("no redaction marker in %s", out)
	}
}

func TestClientCertificateConfig(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "admin"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	keyDER, _ := x509.MarshalECPrivateKey(key)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	b64 := base64.StdEncoding.EncodeToString
	data := fmt.Sprintf(`{"version":1,"storageDriverName":"ontap-nas","managementLIF":"h","svm":"s","clientCertificate":%q,"clientPrivateKey":%q}`, b64(certPEM), b64(keyPEM))
	cfg, err := Parse("t.json", []byte(data), "")
	if err != nil {
		t.Fatal(err)
	}
	if string(cfg.ClientCertificate) != string(certPEM) || string(cfg.ClientPrivateKey) != string(keyPEM) {
		t.Fatal("certificate not decoded")
	}
	if strings.Contains(fmt.Sprint(cfg), "PRIVATE KEY") {
		t.Fatal("private key shown")
	}
	// A key that does not belong to the certificate.
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	otherDER, _ := x509.MarshalECPrivateKey(other)
	data = fmt.Sprintf(`{"version":1,"storageDriverName":"ontap-nas","managementLIF":"h","svm":"s","clientCertificate":%q,"clientPrivateKey":%q}`,
		b64(certPEM), b64(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: otherDER})))
	if _, err := Parse("t.json", []byte(data), ""); err == nil || !strings.Contains(err.Error(), "do not form a valid pair") {
		t.Fatalf("err = %v", err)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"1Gi": 1 << 30, "1G": 1 << 30, "1GiB": 1 << 30, "1GB": 1e9, "100G": 100 << 30, "20MiB": 20 << 20,
		"20m": 20 << 20, "512k": 512 << 10, "1073741824": 1 << 30, "42b": 42, "7 bytes": 7, " 2Ti ": 2 << 40, "0": 0,
	} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "G", "1.5G", "-1G", "+1G", "1X", "abc", "9999999999E", "1 G i"} {
		if got, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) = %d, want error", bad, got)
		}
	}
}

func TestParseUnixPermissions(t *testing.T) {
	for in, want := range map[string]string{
		"755": "755", "0755": "755", "1777": "1777", "---rwxrwxrwx": "777", "rwxr-x---": "750", "--trwxrwxrwx": "1777", "s--rwxr-xr-x": "4755",
	} {
		if got, err := ParseUnixPermissions(in); err != nil || got != want {
			t.Errorf("ParseUnixPermissions(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "rwx", "0999", "rwxrwxrwz", "12345"} {
		if got, err := ParseUnixPermissions(bad); err == nil {
			t.Errorf("ParseUnixPermissions(%q) = %q, want error", bad, got)
		}
	}
}
