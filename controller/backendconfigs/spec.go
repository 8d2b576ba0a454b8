package backendconfigs

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Deletion policies of a TridentBackendConfig (spec.deletionPolicy).
const (
	PolicyDelete = "delete"
	PolicyRetain = "retain"
)

// secretKeys are the keys of Trident's backend Secret that an ontap-nas or
// ontap-san configuration takes, matched case-insensitively as Trident
// does. Other keys are ignored, as in Trident.
var secretKeys = []string{
	"username", "password", "clientPrivateKey",
	"chapUsername", "chapInitiatorSecret", "chapTargetUsername", "chapTargetInitiatorSecret",
}

// rendered is a TridentBackendConfig spec turned into a backend
// configuration for config.Parse.
type rendered struct {
	// config is JSON with the Secret's credentials in it: never log it.
	config         []byte
	deletionPolicy string
	secretName     string
	// overridden names spec keys the Secret replaced (Trident's secret wins).
	overridden []string
	// secretValues are the credentials put into config, for redact.
	secretValues []string
}

// fingerprint identifies what a backend was built from. It covers the
// credentials, so a rotated Secret rebuilds the backend.
func (r *rendered) fingerprint() [32]byte {
	return sha256.Sum256(append([]byte(r.deletionPolicy+"\x00"), r.config...))
}

// errNoSecret means the Secret a spec names does not exist (yet).
var errNoSecret = errors.New("secret not found")

// secretFunc returns the data of a Secret in the TridentBackendConfig's
// namespace, or an error wrapping errNoSecret.
type secretFunc func(ctx context.Context, name string) (map[string][]byte, error)

// render applies Trident's handling of a TridentBackendConfig spec: the
// deletion policy is taken out (default delete), backendName defaults to
// the resource's name, and credentials {name: <Secret>} are replaced by
// the Secret's values. A credentials file (our --backend-config extension)
// is refused: it would let whoever may create TridentBackendConfigs read
// files of the controller's container, such as its TLS keys.
func render(ctx context.Context, tbcName string, spec map[string]any, secret secretFunc) (*rendered, error) {
	if len(spec) == 0 {
		return nil, errors.New("empty spec is not allowed")
	}
	spec = maps.Clone(spec)
	r := &rendered{deletionPolicy: PolicyDelete}

	for _, key := range []string{"deletionPolicy", "credentials", "backendName"} {
		if n := count(spec, key); n > 1 {
			return nil, fmt.Errorf("%s is given %d times (keys are case-insensitive)", key, n)
		}
	}
	if k, v, ok := take(spec, "deletionPolicy"); ok {
		s, isString := v.(string)
		switch {
		case isString && strings.EqualFold(s, PolicyDelete):
		case isString && strings.EqualFold(s, PolicyRetain):
			r.deletionPolicy = PolicyRetain
		default:
			return nil, fmt.Errorf("invalid deletion policy applied: %v (%s must be delete or retain)", v, k)
		}
	}
	if _, _, ok := find(spec, "backendName"); !ok {
		spec["backendName"] = tbcName
	}

	if k, v, ok := take(spec, "credentials"); ok && v != nil {
		creds, isMap := v.(map[string]any)
		if !isMap {
			return nil, fmt.Errorf("%s must be an object {name: <Secret>, type: secret}", k)
		}
		for ck, cv := range creds {
			switch {
			case strings.EqualFold(ck, "name"):
				r.secretName, _ = cv.(string)
			case strings.EqualFold(ck, "type"):
				if t, _ := cv.(string); strings.EqualFold(t, "awsarn") {
					// FSx for NetApp ONTAP: Trident reads the SVM's
					// credentials from AWS Secrets Manager.
					return nil, errors.New(`credentials.type "awsarn" (AWS Secrets Manager) is not supported: ontap-csi calls no AWS API; ` +
						`put the SVM's username and password in a Kubernetes Secret of this namespace and name it here with type secret`)
				} else if t != "" && !strings.EqualFold(t, "secret") {
					return nil, fmt.Errorf("credentials.type %q is not supported; only Kubernetes Secrets (type secret) are", t)
				}
			case strings.EqualFold(ck, "file"):
				return nil, errors.New("credentials.file is not allowed in a TridentBackendConfig; name a Secret in credentials.name")
			default:
				return nil, fmt.Errorf("credentials.%s is not a known key (name, type)", ck)
			}
		}
		if r.secretName == "" {
			return nil, errors.New("credentials.name must name a Secret")
		}
		data, err := secret(ctx, r.secretName)
		if err != nil {
			return nil, err
		}
		for sk, sv := range data {
			i := slices.IndexFunc(secretKeys, func(k string) bool { return strings.EqualFold(k, sk) })
			if i < 0 {
				continue
			}
			key := secretKeys[i]
			if old, _, ok := take(spec, key); ok {
				r.overridden = append(r.overridden, old)
			}
			spec[key] = string(sv)
			r.secretValues = append(r.secretValues, string(sv))
		}
		slices.Sort(r.overridden)
	}

	cfg, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	r.config = cfg
	return r, nil
}

// find looks a key up case-insensitively, as Trident's JSON decoding does.
func find(m map[string]any, key string) (string, any, bool) {
	if v, ok := m[key]; ok {
		return key, v, true
	}
	for k, v := range m {
		if strings.EqualFold(k, key) {
			return k, v, true
		}
	}
	return "", nil, false
}

// count returns how many keys equal key case-insensitively.
func count(m map[string]any, key string) int {
	n := 0
	for k := range m {
		if strings.EqualFold(k, key) {
			n++
		}
	}
	return n
}

// take is find, and removes the key.
func take(m map[string]any, key string) (string, any, bool) {
	k, v, ok := find(m, key)
	if ok {
		delete(m, k)
	}
	return k, v, ok
}

// redact replaces the Secret's values in a message: a value quoted back by
// the parser or by ONTAP must not reach a status or a log line.
func (r *rendered) redact(msg string) string {
	for _, v := range r.secretValues {
		if len(v) >= 3 {
			msg = strings.ReplaceAll(msg, v, "<redacted>")
		}
	}
	return msg
}
