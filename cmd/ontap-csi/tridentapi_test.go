package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/ontap-csi/ontap-csi/controller/tridentrest"
	"github.com/ontap-csi/ontap-csi/server"
)

func TestTridentAPICommandLines(t *testing.T) {
	ep := "unix://" + filepath.Join(t.TempDir(), "csi.sock")
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"https_rest without crd_persistence", []string{"--csi_role=controller", "--csi_endpoint=" + ep, "--https_rest"}, "--https_rest needs --crd_persistence"},
		{"crd_persistence without the API", []string{"--csi_role=controller", "--csi_endpoint=" + ep, "--crd_persistence"}, "--crd_persistence needs the Kubernetes API"},
		{"allInOne with crd_persistence", []string{"--csi_role=allInOne", "--csi_node_name=n", "--csi_endpoint=" + ep, "--crd_persistence", "--k8s_pod"}, "not supported in the allInOne role"},
		{"https_rest without a port", []string{"--csi_role=node", "--csi_node_name=n", "--csi_endpoint=" + ep, "--https_rest", "--https_port="}, "--https_rest needs --https_port"},
		{"bad QPS", []string{"--csi_role=node", "--csi_node_name=n", "--csi_endpoint=" + ep, "--k8s_api_qps=0"}, "must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := runToExit(t, tc.args...)
			if code != 2 || !strings.Contains(out, tc.msg) {
				t.Fatalf("exit %d, output:\n%s", code, out)
			}
		})
	}
	// --crd_persistence in a pod without a service account: a clear failure.
	out, code := runToExit(t, "--csi_role=controller", "--csi_endpoint="+ep, "--crd_persistence", "--k8s_pod")
	if code != 1 || !strings.Contains(out, "Kubernetes API (--k8s_pod)") {
		t.Fatalf("--k8s_pod outside a pod: exit %d, output:\n%s", code, out)
	}
}

func TestTridentAddressIsLoopback(t *testing.T) {
	for in, want := range map[string]string{"127.0.0.1": "127.0.0.1", "0.0.0.0": "127.0.0.1", "[::1]": "::1", "::1": "::1", "10.0.0.5": "127.0.0.1"} {
		o := tridentAPIOptions{address: in, k8sQPS: 1, k8sBurst: 1, httpsPort: "8443"}
		if err := o.validate(roleController); err != nil {
			t.Fatal(err)
		}
		if o.address != want {
			t.Errorf("--address=%s serves on %s, want %s", in, o.address, want)
		}
	}
}

func TestReportedVersion(t *testing.T) {
	defer func(v string) { server.Version = v }(server.Version)
	for ver, want := range map[string]string{
		"0.1.0":               "26.06.0+ontap-csi.0.1.0",
		"v0.2.0-3-gabc-dirty": "26.06.0+ontap-csi.v0.2.0-3-gabc-dirty",
		"dev":                 "26.06.0+ontap-csi.dev",
		"1.0+build/7":         "26.06.0+ontap-csi.1.0-build-7",
		"..":                  "26.06.0+ontap-csi",
	} {
		server.Version = ver
		got := reportedVersion()
		if got != want {
			t.Errorf("Version %q: reported %q, want %q", ver, got, want)
		}
		if !versionRE.MatchString(got) {
			t.Errorf("%q is not a version Trident's parser accepts", got)
		}
	}
}

func TestTridentctl(t *testing.T) {
	srv := httptest.NewServer(tridentrest.VersionAPI("26.06.0+ontap-csi.test"))
	defer srv.Close()
	server := strings.TrimPrefix(srv.URL, "http://")
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":"orchestrator not ready"}`, http.StatusServiceUnavailable)
	}))
	defer down.Close()

	run := func(env string, args ...string) (int, string, string) {
		t.Setenv("TRIDENT_SERVER", env)
		var stdout, stderr bytes.Buffer
		code := tridentctlMain(args, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}

	// The Deployment's exec liveness and readiness probes: exit status only.
	if code, out, errOut := run("", "-s", server, "version"); code != 0 || !strings.Contains(out, "SERVER VERSION") || !strings.Contains(out, "26.06.0+ontap-csi.test") {
		t.Errorf("exec probe: exit %d\n%s%s", code, out, errOut)
	}
	// The operator's wait for the REST interface: JSON with server.version.
	code, out, _ := run("", "--server="+server, "version", "-o", "json")
	var both struct{ Server, Client cliVersion }
	if code != 0 || json.Unmarshal([]byte(out), &both) != nil || both.Server.Version != "26.06.0+ontap-csi.test" ||
		both.Server.MajorVersion != 26 || both.Server.MinorVersion != 6 || both.Server.BuildMetadata != "ontap-csi.test" {
		t.Errorf("version -o json: exit %d\n%s", code, out)
	}
	// The operator's image check: YAML with client.version, no server.
	code, out, _ = run("", "version", "--client", "-o", "yaml")
	var client struct{ Client cliVersion }
	if code != 0 || yaml.Unmarshal([]byte(out), &client) != nil || client.Client.Version != reportedVersion() || client.Client.APIVersion != "1" {
		t.Errorf("version --client -o yaml: exit %d\n%s", code, out)
	}
	// $TRIDENT_SERVER, as the controller Deployment sets it.
	if code, out, errOut := run(server, "version", "-o", "wide"); code != 0 || !strings.Contains(out, "SERVER GO VERSION") {
		t.Errorf("version with $TRIDENT_SERVER: exit %d\n%s%s", code, out, errOut)
	}

	for _, tc := range []struct {
		name string
		env  string
		args []string
		msg  string
	}{
		{"no server", "", []string{"version"}, "no server"},
		{"server down", "", []string{"-s", "127.0.0.1:1", "version"}, "could not get version"},
		{"server not ready", "", []string{"-s", strings.TrimPrefix(down.URL, "http://"), "version"}, "orchestrator not ready"},
		{"other command", "", []string{"get", "backend"}, `"get" is not implemented`},
		{"no command", "", nil, "no command given"},
		{"unknown flag", "", []string{"version", "--bogus"}, "unknown flag: --bogus"},
		{"missing flag value", "", []string{"version", "-s"}, "flag needs an argument: -s"},
		{"bad output", "", []string{"version", "-o", "xml", "--client"}, `unsupported output format "xml"`},
		{"extra argument", "", []string{"version", "now"}, `unexpected argument "now"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(tc.env, tc.args...)
			if code != 1 || !strings.Contains(errOut, tc.msg) || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want 1 and %q", code, out, errOut, tc.msg)
			}
		})
	}
}
