package plugintest

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// Sim is an ONTAP simulator serving HTTPS on the loopback, its state and
// backing files below the test's root.
type Sim struct {
	*ontapsim.Simulator
	URL    string
	CAFile string // the simulator's CA, for the shims (ONTAP_SIM_CA)
}

// StartSim starts a simulator with cfg (DataDir defaults to <root>/sim) and
// closes it when the test ends. On a real kernel its data plane is the
// kernel's (LIO and nfsd) unless cfg names one.
func StartSim(t testing.TB, r Roots, cfg ontapsim.Config) *Sim {
	t.Helper()
	if RealKernel() && cfg.DataPlane == "" {
		cfg.DataPlane = ontapsim.DataPlaneKernel
	}
	if cfg.DataDir == "" {
		cfg.DataDir = filepath.Join(r.Root, "sim")
	}
	s, err := ontapsim.New(cfg)
	if err != nil {
		t.Fatalf("simulator: %v", err)
	}
	t.Cleanup(func() {
		s.Close()
		if cfg.DataPlane == ontapsim.DataPlaneKernel {
			AssertNoKernelObjects(t)
		}
	})
	u, err := s.Start("127.0.0.1:0", true)
	if err != nil {
		t.Fatalf("simulator start: %v", err)
	}
	ca := filepath.Join(r.Root, "sim-ca.pem")
	if err := os.WriteFile(ca, s.CACertificatePEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	return &Sim{Simulator: s, URL: u, CAFile: ca}
}

// WriteBackendConfig writes a Trident backend config for driver
// ("ontap-nas", "ontap-san") on s into dir, with the credentials in a file
// beside it, as an operator would, and returns its path. extra adds or
// overrides keys.
func WriteBackendConfig(t testing.TB, dir string, s *ontapsim.Simulator, driver string, extra map[string]any) string {
	t.Helper()
	u, err := url.Parse(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeJSON(t, filepath.Join(dir, "credentials.json"), map[string]string{"username": "admin", "password": "password"})
	cfg := map[string]any{
		"version":              1,
		"storageDriverName":    driver,
		"backendName":          driver + "-sim",
		"managementLIF":        u.Host,
		"svm":                  s.Info().SVM,
		"credentials":          map[string]string{"file": "credentials.json"},
		"trustedCACertificate": base64.StdEncoding.EncodeToString(s.CACertificatePEM()),
		"storagePrefix":        "trident_",
	}
	for k, v := range extra {
		cfg[k] = v
	}
	path := filepath.Join(dir, cfg["backendName"].(string)+".json")
	writeJSON(t, path, cfg)
	return path
}

// backendPolicyRE matches Trident's per-backend export policy name.
var backendPolicyRE = regexp.MustCompile(`^trident-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func writeJSON(t testing.TB, path string, v any) {
	t.Helper()
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// AssertONTAPClean fails the test if ONTAP holds anything a plugin makes
// that should be gone: volumes (economy pools included), qtrees, LUNs,
// igroups, and export policies other than the SVM's "default", the
// backend's empty policy ("<storagePrefix>empty") and ontap-nas-economy's
// backend policy ("trident-<backendUUID>"), which Trident keeps too until
// the backend is deleted.
func AssertONTAPClean(t testing.TB, s *ontapsim.Simulator) {
	t.Helper()
	for _, v := range s.Volumes() {
		if !v.IsSVMRoot {
			t.Errorf("ONTAP: volume %s is left over", v.Name)
		}
	}
	for _, q := range s.Qtrees() {
		t.Errorf("ONTAP: qtree %s/%s is left over", q.Volume, q.Name)
	}
	for _, l := range s.LUNs() {
		t.Errorf("ONTAP: LUN %s is left over", l.Path)
	}
	for _, g := range s.IGroups() {
		t.Errorf("ONTAP: igroup %s is left over (initiators %v)", g.Name, g.Initiators)
	}
	for _, pol := range s.ExportPolicies() {
		if pol.Name != "default" && pol.Name != "trident_empty" && !backendPolicyRE.MatchString(pol.Name) {
			t.Errorf("ONTAP: export policy %s is left over (%d rules)", pol.Name, len(pol.Rules))
		}
	}
}

// AssertNoKernelObjects fails the test if a closed simulator left anything
// of its kernel data plane: LIO targets or backstores, nfsd exports.
func AssertNoKernelObjects(t testing.TB) {
	t.Helper()
	// The simulator's targets have NetApp's IQN prefix and its backstores
	// live on the fileio HBA 1992 (test/ontapsim/kernel.go).
	for _, pattern := range []string{
		"/sys/kernel/config/target/iscsi/iqn.1992-08.com.netapp:*",
		"/sys/kernel/config/target/core/fileio_1992/*/enable",
	} {
		if left, _ := filepath.Glob(pattern); len(left) > 0 {
			t.Errorf("LIO objects left after the simulator closed: %v", left)
		}
	}
	if etab, _ := os.ReadFile("/var/lib/nfs/etab"); len(strings.TrimSpace(string(etab))) > 0 {
		t.Errorf("nfsd exports left after the simulator closed:\n%s", etab)
	}
}
