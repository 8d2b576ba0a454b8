package tridentrest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/ontap-csi/ontap-csi/controller/tridentnodes"
	"github.com/ontap-csi/ontap-csi/nodeinfo"
	"github.com/ontap-csi/ontap-csi/test/tridentcerts"
)

type fixture struct {
	url   string
	certs tridentcerts.Dir
	nodes *tridentnodes.Store
}

func start(t *testing.T) *fixture {
	t.Helper()
	certs, err := tridentcerts.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	worker := &unstructured.Unstructured{}
	worker.SetAPIVersion("v1")
	worker.SetKind("Node")
	worker.SetName("worker-1")
	worker.SetLabels(map[string]string{
		"topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/region": "r1", "kubernetes.io/hostname": "worker-1",
	})
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{tridentnodes.GVR: "TridentNodeList", nodeinfo.NodesGVR: "NodeList"}, worker)
	nodes := tridentnodes.New(dyn, "trident")
	srv, err := ListenMutualTLS("127.0.0.1:0", TLSFiles{CACert: certs.Path(tridentcerts.CACert), Cert: certs.Path(tridentcerts.ServerCert), Key: certs.Path(tridentcerts.ServerKey)},
		ControllerAPI(nodes, NodeTopology(dyn), "26.06.0+ontap-csi.test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return &fixture{url: "https://" + srv.Addr().String(), certs: certs, nodes: nodes}
}

// client is configured as Trident's node plugin configures its REST client:
// the CA, server name trident-csi, and a client certificate.
func (f *fixture) client(t *testing.T, certPEM, keyPEM []byte) *http.Client {
	t.Helper()
	ca, err := os.ReadFile(f.certs.Path(tridentcerts.CACert))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	conf := &tls.Config{RootCAs: pool, ServerName: "trident-csi"}
	if certPEM != nil {
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		conf.Certificates = []tls.Certificate{pair}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: conf}}
}

func (f *fixture) nodeClient(t *testing.T) *http.Client {
	t.Helper()
	cert, err := os.ReadFile(f.certs.Path(tridentcerts.ClientCert))
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(f.certs.Path(tridentcerts.ClientKey))
	if err != nil {
		t.Fatal(err)
	}
	return f.client(t, cert, key)
}

func do(t *testing.T, c *http.Client, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s %s: %s: not JSON: %q", method, url, resp.Status, data)
	}
	return resp.StatusCode, out
}

// Bodies as the node plugins of Trident 20.10 and 26.06 send them
// (json.MarshalIndent of utils.Node / models.Node).
const (
	body2010 = `{
 "name": "worker-1",
 "iqn": "iqn.1993-08.org.debian:01:abc",
 "ips": ["10.0.0.1", "192.168.1.1"],
 "nodePrep": {"enabled": false},
 "hostInfo": {"os": {"distro": "ubuntu", "version": "20.04", "release": "20.04"}}
}`
	body2606 = `{
 "name": "worker-1",
 "iqn": "iqn.1993-08.org.debian:01:abc",
 "hostWWPNMap": {"host1": ["0x1"]},
 "ips": ["10.0.0.1"],
 "hostInfo": {"os": {"distro": "rhel", "version": "9"}, "services": ["iscsid", "multipathd"]},
 "deleted": false,
 "publicationState": "clean",
 "logLevel": "",
 "logWorkflows": "",
 "logLayers": ""
}`
)

func TestNodeRegistration(t *testing.T) {
	f := start(t)
	c := f.nodeClient(t)
	nodeURL := f.url + BaseURL + "/node/worker-1"

	for name, body := range map[string]string{"20.10": body2010, "26.06": body2606} {
		code, resp := do(t, c, http.MethodPut, nodeURL, body)
		if code != http.StatusCreated {
			t.Fatalf("%s body: PUT = %d %v", name, code, resp)
		}
		labels, _ := resp["topologyLabels"].(map[string]any)
		if resp["name"] != "worker-1" || labels["topology.kubernetes.io/zone"] != "z1" || labels["topology.kubernetes.io/region"] != "r1" || len(labels) != 2 {
			t.Fatalf("%s body: PUT answer %v; want the node's topology.kubernetes.io labels only", name, resp)
		}
		n, err := f.nodes.Get(context.Background(), "worker-1")
		if err != nil {
			t.Fatal(err)
		}
		if n.IQN != "iqn.1993-08.org.debian:01:abc" || len(n.IPs) == 0 || !strings.Contains(string(n.HostInfo), `"distro"`) {
			t.Fatalf("%s body: stored %+v", name, n)
		}
	}

	code, resp := do(t, c, http.MethodGet, nodeURL, "")
	node, _ := resp["node"].(map[string]any)
	if code != http.StatusOK || node["name"] != "worker-1" || node["iqn"] != "iqn.1993-08.org.debian:01:abc" {
		t.Fatalf("GET = %d %v", code, resp)
	}
	code, resp = do(t, c, http.MethodGet, f.url+BaseURL+"/node", "")
	if code != http.StatusOK || !slices.Equal(toStrings(resp["nodes"]), []string{"worker-1"}) {
		t.Fatalf("list = %d %v", code, resp)
	}
	code, resp = do(t, c, http.MethodGet, f.url+BaseURL+"/version", "")
	if code != http.StatusOK || resp["version"] != "26.06.0+ontap-csi.test" || resp["goVersion"] == "" {
		t.Fatalf("version = %d %v", code, resp)
	}
	if code, resp = do(t, c, http.MethodDelete, nodeURL, ""); code != http.StatusOK {
		t.Fatalf("DELETE = %d %v", code, resp)
	}
	if code, resp = do(t, c, http.MethodGet, nodeURL, ""); code != http.StatusNotFound || resp["error"] == "" {
		t.Fatalf("GET after delete = %d %v", code, resp)
	}
	if code, _ = do(t, c, http.MethodDelete, nodeURL, ""); code != http.StatusNotFound {
		t.Fatalf("second DELETE = %d, want 404", code)
	}
}

func TestNodeRegistrationRejects(t *testing.T) {
	f := start(t)
	c := f.nodeClient(t)
	for _, tc := range []struct {
		name, url, body string
		code            int
	}{
		{"invalid JSON", "/node/worker-1", `{"name": `, http.StatusBadRequest},
		{"name differs from the URL", "/node/worker-1", `{"name": "worker-2"}`, http.StatusBadRequest},
		{"unknown Kubernetes node", "/node/worker-9", `{"name": "worker-9"}`, http.StatusServiceUnavailable},
		{"oversized body", "/node/worker-1", `{"name": "worker-1", "iqn": "` + strings.Repeat("x", maxBody) + `"}`, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, resp := do(t, c, http.MethodPut, f.url+BaseURL+tc.url, tc.body)
			if code != tc.code || resp["error"] == "" {
				t.Fatalf("PUT = %d %v, want %d with an error", code, resp, tc.code)
			}
		})
	}
	if _, err := f.nodes.Get(context.Background(), "worker-9"); err == nil {
		t.Error("a node was stored although its topology could not be read")
	}
	// Empty body name: the URL names the node.
	if code, resp := do(t, c, http.MethodPut, f.url+BaseURL+"/node/worker-1", `{"iqn": "iqn.x"}`); code != http.StatusCreated {
		t.Fatalf("PUT without a name in the body = %d %v", code, resp)
	}
}

func TestMutualTLS(t *testing.T) {
	f := start(t)
	url := f.url + BaseURL + "/node/worker-1"

	// No client certificate: the handshake fails.
	if _, err := f.client(t, nil, nil).Post(url, "application/json", bytes.NewReader([]byte(body2606))); err == nil {
		t.Error("a client without a certificate was admitted")
	}
	// Signed by the CA, but not the node plugins' certificate.
	cert, key, err := f.certs.Issue("trident-csi", x509.ExtKeyUsageClientAuth)
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := do(t, f.client(t, cert, key), http.MethodPut, url, body2606); code != http.StatusUnauthorized {
		t.Errorf("client certificate for trident-csi: %d, want 401", code)
	}
	// The right name from another CA.
	other, err := tridentcerts.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err = other.Issue("trident-node", x509.ExtKeyUsageClientAuth)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader(body2606))
	if _, err := f.client(t, cert, key).Do(req); err == nil {
		t.Error("a client certificate from another CA was admitted")
	}
	if _, err := f.nodes.Get(context.Background(), "worker-1"); err == nil {
		t.Error("an unauthenticated request stored a node")
	}
}

func TestListenMutualTLSNeedsItsFiles(t *testing.T) {
	certs, err := tridentcerts.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	garbage := certs.Path("garbage")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	files := TLSFiles{CACert: certs.Path(tridentcerts.CACert), Cert: certs.Path(tridentcerts.ServerCert), Key: certs.Path(tridentcerts.ServerKey)}
	for name, edit := range map[string]func(*TLSFiles){
		"no server certificate": func(f *TLSFiles) { f.Cert = "/nonexistent/serverCert" },
		"no CA":                 func(f *TLSFiles) { f.CACert = "/nonexistent/caCert" },
		"CA is not PEM":         func(f *TLSFiles) { f.CACert = garbage },
	} {
		fl := files
		edit(&fl)
		if s, err := ListenMutualTLS("127.0.0.1:0", fl, http.NotFoundHandler()); err == nil {
			s.Shutdown(context.Background())
			t.Errorf("%s: served", name)
		} else if !strings.Contains(err.Error(), "/nonexistent/") && !strings.Contains(err.Error(), garbage) {
			t.Errorf("%s: error does not name the file: %v", name, err)
		}
	}
}

func TestVersionAPI(t *testing.T) {
	srv, err := Listen("127.0.0.1:0", VersionAPI("20.10.0+ontap-csi.test"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	base := "http://" + srv.Addr().String() + BaseURL
	code, resp := do(t, http.DefaultClient, http.MethodGet, base+"/version", "")
	if code != http.StatusOK || resp["version"] != "20.10.0+ontap-csi.test" {
		t.Fatalf("version = %d %v", code, resp)
	}
	// The plain HTTP server carries nothing but the version.
	resp2, err := http.Get(base + "/node")
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusNotFound {
		t.Fatalf("node list over plain HTTP = %s, want 404", resp2.Status)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}
