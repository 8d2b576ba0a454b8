package config

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// tridentKeysFile lists every key Trident's ontap-nas and ontap-san decode,
// generated from Trident's types (testdata/README.md).
const tridentKeysFile = "testdata/trident-v26.06.0-keys.txt"

// everyKeyFile is a config with every one of those keys.
const everyKeyFile = "testdata/every-key.yaml"

func tridentKeys(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(tridentKeysFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var keys []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if k := strings.TrimSpace(sc.Text()); k != "" {
			keys = append(keys, k)
		}
	}
	if len(keys) < 100 {
		t.Fatalf("%s holds %d keys; Trident 26.06's types have over 100", tridentKeysFile, len(keys))
	}
	return keys
}

// keyPaths lists the key paths of a decoded document, descending only into
// values whose keys are themselves listed (labels, topologies and other
// free-form maps are values, not keys).
func keyPaths(v any, prefix string, listed map[string]bool, out *[]string) {
	descend := func(path string) bool {
		for k := range listed {
			if strings.HasPrefix(k, path+".") || strings.HasPrefix(k, path+"[].") {
				return true
			}
		}
		return false
	}
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	for k, child := range m {
		path := prefix + k
		*out = append(*out, path)
		if !descend(path) {
			continue
		}
		if items, ok := child.([]any); ok {
			for _, it := range items {
				keyPaths(it, path+"[].", listed, out)
			}
			continue
		}
		keyPaths(child, path+".", listed, out)
	}
}

func everyKeyDocument(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(everyKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestEveryKeyFileHoldsExactlyTridentsKeys keeps every-key.yaml honest: it
// holds each key of Trident's list, and nothing else.
func TestEveryKeyFileHoldsExactlyTridentsKeys(t *testing.T) {
	keys := tridentKeys(t)
	listed := map[string]bool{}
	for _, k := range keys {
		listed[k] = true
	}
	var inFile []string
	keyPaths(everyKeyDocument(t), "", listed, &inFile)
	sort.Strings(inFile)
	inFile = slices.Compact(inFile)
	for _, k := range keys {
		if !slices.Contains(inFile, k) {
			t.Errorf("%s lacks Trident's key %s", everyKeyFile, k)
		}
	}
	for _, k := range inFile {
		if !listed[k] {
			t.Errorf("%s holds %s, which Trident 26.06 does not know", everyKeyFile, k)
		}
	}
}

// parserKind returns how the parser treats a key path of Trident's list,
// and the path of the key whose warning covers it (itself, or an ignored
// key above it, like gcnv for gcnv.poolID); ok is false for a key the
// parser would call unknown.
func parserKind(path string) (kind keyKind, warnedAs string, ok bool) {
	parts := strings.Split(path, ".")
	tables := map[string]map[string]keyKind{"": topKeys, "storage[]": poolKeys, "defaults": defaultsKeys,
		"storage[].defaults": defaultsKeys, "aws": awsKeys}
	for i := range parts {
		table, known := tables[strings.Join(parts[:i], ".")]
		if !known {
			return 0, "", false
		}
		k, found := table[strings.TrimSuffix(parts[i], "[]")]
		if !found {
			return 0, "", false
		}
		if k == keyIgnored || i == len(parts)-1 {
			return k, strings.Join(parts[:i+1], "."), true
		}
	}
	return 0, "", false
}

func TestParserKnowsEveryTridentKey(t *testing.T) {
	for _, k := range tridentKeys(t) {
		kind, warnedAs, ok := parserKind(k)
		if !ok {
			t.Errorf("Trident's key %s is unknown to the parser", k)
			continue
		}
		if kind == keyIgnored && ignoredBecause[warnedAs[strings.LastIndex(warnedAs, ".")+1:]] == "" {
			t.Errorf("ignored key %s has no ignoredBecause entry saying what happens instead", warnedAs)
		}
	}
}

// warnedKeys are the keys of every-key.yaml that get their one warning
// although the parser reads them: what they ask for is done differently,
// or (per driver) not at all.
var warnedKeys = map[string][]string{
	DriverONTAPNAS: append([]string{"aws", "igroupName", "defaults.formatOptions", "storage[0].defaults.formatOptions",
		"useCHAP"}, economyKeys...),
	DriverONTAPSAN: append([]string{"aws", "igroupName", "defaults.formatOptions", "storage[0].defaults.formatOptions",
		"dataLIF", "autoExportPolicy"}, economyKeys...),
}

// TestEveryTridentKeyLoads loads every-key.yaml as ontap-nas and as
// ontap-san: it loads, and each key the parser does not implement gets
// exactly one warning, which names it. credentials names a Kubernetes
// Secret, which only a TridentBackendConfig resolves (package
// backendconfigs loads this file with it); here it is left out.
func TestEveryTridentKeyLoads(t *testing.T) {
	var ignored []string
	for _, k := range tridentKeys(t) {
		if kind, warnedAs, _ := parserKind(k); kind == keyIgnored {
			ignored = append(ignored, strings.ReplaceAll(warnedAs, "storage[]", "storage[0]"))
		}
	}
	slices.Sort(ignored)
	ignored = slices.Compact(ignored)
	for _, driver := range []string{DriverONTAPNAS, DriverONTAPSAN} {
		t.Run(driver, func(t *testing.T) {
			doc := everyKeyDocument(t)
			delete(doc, "credentials")
			doc["storageDriverName"] = driver
			data, _ := json.Marshal(doc)
			cfg, err := Parse(everyKeyFile, data, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, key := range append(append([]string(nil), ignored...), warnedKeys[driver]...) {
				n := 0
				for _, w := range cfg.Warnings {
					if strings.HasPrefix(w, key+" ") || strings.HasPrefix(w, key+":") {
						n++
					}
				}
				if n != 1 {
					t.Errorf("%s: %d warnings name it, want 1", key, n)
				}
			}
			if want := len(ignored) + len(warnedKeys[driver]) + 1; len(cfg.Warnings) != want {
				// +1: the client certificate wins over username and password.
				t.Errorf("%d warnings, want %d:\n%s", len(cfg.Warnings), want, strings.Join(cfg.Warnings, "\n"))
			}
		})
	}
}
