package backendconfigs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
)

func secretsOf(m map[string]map[string]string) secretFunc {
	return func(_ context.Context, name string) (map[string][]byte, error) {
		s, ok := m[name]
		if !ok {
			return nil, fmt.Errorf("Secret %q: %w", name, errNoSecret)
		}
		out := map[string][]byte{}
		for k, v := range s {
			out[k] = []byte(v)
		}
		return out, nil
	}
}

func TestRender(t *testing.T) {
	secrets := secretsOf(map[string]map[string]string{
		"creds": {"username": "admin", "Password": "s3cr3t-pw", "ChapInitiatorSecret": "chap-secret-1", "unrelated": "x"},
	})
	for _, tc := range []struct {
		name   string
		spec   string
		want   map[string]any // keys that must be in the config
		absent []string       // keys that must not
		policy string
		err    string
	}{
		{
			name:   "defaults",
			spec:   `{"version": 1, "storageDriverName": "ontap-nas"}`,
			want:   map[string]any{"backendName": "tbc-name", "storageDriverName": "ontap-nas"},
			absent: []string{"deletionPolicy", "credentials"},
			policy: PolicyDelete,
		},
		{
			name:   "explicit name and retain, any case",
			spec:   `{"backendName": "nas1", "DeletionPolicy": "Retain"}`,
			want:   map[string]any{"backendName": "nas1"},
			absent: []string{"DeletionPolicy"},
			policy: PolicyRetain,
		},
		{
			name:   "credentials from the Secret, keys matched case-insensitively",
			spec:   `{"credentials": {"name": "creds", "type": "secret"}, "useCHAP": true}`,
			want:   map[string]any{"username": "admin", "password": "s3cr3t-pw", "chapInitiatorSecret": "chap-secret-1"},
			absent: []string{"credentials", "unrelated", "Password"},
			policy: PolicyDelete,
		},
		{
			name:   "the Secret wins over the spec, as in Trident",
			spec:   `{"credentials": {"name": "creds"}, "username": "other", "PASSWORD": "old"}`,
			want:   map[string]any{"username": "admin", "password": "s3cr3t-pw"},
			absent: []string{"PASSWORD"},
			policy: PolicyDelete,
		},
		{name: "empty spec", spec: `{}`, err: "empty spec"},
		{name: "credentials twice", spec: `{"credentials": {"name": "creds"}, "Credentials": {"name": "other"}}`, err: "credentials is given 2 times"},
		{name: "bad deletion policy", spec: `{"deletionPolicy": "keep"}`, err: "invalid deletion policy applied: keep"},
		{name: "deletion policy not a string", spec: `{"deletionPolicy": 1}`, err: "invalid deletion policy"},
		{name: "credentials not an object", spec: `{"credentials": "creds"}`, err: "must be an object"},
		{name: "credentials without a name", spec: `{"credentials": {"type": "secret"}}`, err: "credentials.name must name a Secret"},
		{name: "credentials of another store", spec: `{"credentials": {"name": "arn:aws:x", "type": "awsarn"}}`, err: `credentials.type "awsarn" (AWS Secrets Manager) is not supported: ontap-csi calls no AWS API`},
		{name: "credentials of an unknown store", spec: `{"credentials": {"name": "x", "type": "vault"}}`, err: `credentials.type "vault" is not supported`},
		{name: "credentials file", spec: `{"credentials": {"file": "/certs/caKey"}}`, err: "credentials.file is not allowed"},
		{name: "unknown credentials key", spec: `{"credentials": {"name": "creds", "namespace": "x"}}`, err: "credentials.namespace is not a known key"},
		{name: "missing Secret", spec: `{"credentials": {"name": "nope"}}`, err: `Secret "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var spec map[string]any
			if err := json.Unmarshal([]byte(tc.spec), &spec); err != nil {
				t.Fatal(err)
			}
			r, err := render(context.Background(), "tbc-name", spec, secrets)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				if tc.name == "missing Secret" && !errors.Is(err, errNoSecret) {
					t.Errorf("missing Secret error does not wrap errNoSecret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var cfg map[string]any
			if err := json.Unmarshal(r.config, &cfg); err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.want {
				if cfg[k] != v {
					t.Errorf("config[%s] = %v, want %v", k, cfg[k], v)
				}
			}
			for _, k := range tc.absent {
				if _, ok := cfg[k]; ok {
					t.Errorf("config has %s", k)
				}
			}
			if r.deletionPolicy != tc.policy {
				t.Errorf("policy = %q, want %q", r.deletionPolicy, tc.policy)
			}
			if _, ok := spec["credentials"]; strings.Contains(tc.spec, `"credentials"`) && !ok {
				t.Error("render changed the caller's spec")
			}
		})
	}
}

func TestFingerprintFollowsTheSecret(t *testing.T) {
	spec := map[string]any{"storageDriverName": "ontap-nas", "credentials": map[string]any{"name": "c"}}
	fp := func(pw string) [32]byte {
		r, err := render(context.Background(), "x", spec, secretsOf(map[string]map[string]string{"c": {"password": pw}}))
		if err != nil {
			t.Fatal(err)
		}
		return r.fingerprint()
	}
	if fp("a") == fp("b") {
		t.Fatal("a rotated password does not change the fingerprint")
	}
	if fp("a") != fp("a") {
		t.Fatal("the fingerprint is not stable")
	}
}

func TestRedact(t *testing.T) {
	r := &rendered{secretValues: []string{"s3cr3t-pw", "ab"}}
	got := r.redact(`password: "s3cr3t-pw" is not valid; ab stays (too short to redact safely)`)
	if strings.Contains(got, "s3cr3t-pw") || !strings.Contains(got, "<redacted>") || !strings.Contains(got, "ab stays") {
		t.Fatalf("redact = %q", got)
	}
}

// FuzzRender feeds arbitrary specs (user input: a TridentBackendConfig's
// spec) through render: it must not panic, and a config it produces is a
// JSON object that carries no credentials reference any more.
func FuzzRender(f *testing.F) {
	for _, s := range []string{
		`{"version":1,"storageDriverName":"ontap-nas","managementLIF":"10.0.0.1","svm":"svm0","credentials":{"name":"c"}}`,
		`{"deletionPolicy":"retain","backendName":"b","credentials":{"name":"c","type":"secret"}}`,
		`{"credentials":{"file":"x"}}`,
		`{"CREDENTIALS":{"NAME":"c","TYPE":"Secret"},"Username":"u"}`,
		`{"deletionPolicy":null,"credentials":null}`,
		`{"credentials":{"name":"c"},"Credentials":{"name":"c"},"deletionpolicy":"retain","deletionPolicy":"delete"}`,
	} {
		f.Add([]byte(s))
	}
	secrets := secretsOf(map[string]map[string]string{"c": {"username": "u", "password": "p"}})
	f.Fuzz(func(t *testing.T, data []byte) {
		var spec map[string]any
		if json.Unmarshal(data, &spec) != nil {
			return
		}
		r, err := render(context.Background(), "fuzz", spec, secrets)
		if err != nil {
			return
		}
		var cfg map[string]any
		if err := json.Unmarshal(r.config, &cfg); err != nil {
			t.Fatalf("config is not a JSON object: %v", err)
		}
		if _, _, ok := find(cfg, "credentials"); ok {
			t.Fatal("config still has credentials")
		}
		if _, _, ok := find(cfg, "deletionPolicy"); ok {
			t.Fatal("config still has deletionPolicy")
		}
		if r.deletionPolicy != PolicyDelete && r.deletionPolicy != PolicyRetain {
			t.Fatalf("policy %q", r.deletionPolicy)
		}
	})
}

// TestEveryTridentKeyLoadsAsASpec loads the config holding every key
// Trident 26.06's ontap-nas and ontap-san know (its credentials name a
// Secret) as a TridentBackendConfig spec: the keys list is
// backends/ontap/config/testdata/trident-v26.06.0-keys.txt, and the config
// package checks each key's warning.
func TestEveryTridentKeyLoadsAsASpec(t *testing.T) {
	data, err := os.ReadFile("../../backends/ontap/config/testdata/every-key.yaml")
	if err != nil {
		t.Fatal(err)
	}
	secrets := secretsOf(map[string]map[string]string{"every-key-secret": {"username": "vsadmin", "password": "from-the-secret"}})
	for _, driver := range []string{config.DriverONTAPNAS, config.DriverONTAPSAN} {
		var spec map[string]any
		if err := yaml.Unmarshal(data, &spec); err != nil {
			t.Fatal(err)
		}
		spec["storageDriverName"] = driver
		r, err := render(context.Background(), "every-key", spec, secrets)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Parse("every-key", r.config, "")
		if err != nil {
			t.Fatalf("%s: %v", driver, err)
		}
		if cfg.Password != "from-the-secret" || cfg.AWS == nil || cfg.StorageDriverName != driver {
			t.Errorf("%s: %v", driver, cfg)
		}
	}
}
