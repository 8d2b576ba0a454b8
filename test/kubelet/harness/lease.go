package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LeaseFile is the node lease in the plugin dir (docs/design/registration.md §4).
const LeaseFile = "lease.json"

// Lease is what the harness reads of lease.json. The harness observes the
// lease, it does not depend on its exact encoding: keys are matched without
// regard to case and missing fields stay zero.
type Lease struct {
	Generation uint64
	Pod        string
	PID        int
	Phase      string
	Socket     string
}

func (l Lease) String() string {
	return fmt.Sprintf("generation=%d holder=%s pid=%d phase=%s socket=%s",
		l.Generation, l.Pod, l.PID, l.Phase, filepath.Base(l.Socket))
}

// ReadLease reads pluginDir/lease.json.
func ReadLease(pluginDir string) (Lease, error) {
	b, err := os.ReadFile(filepath.Join(pluginDir, LeaseFile))
	if err != nil {
		return Lease{}, err
	}
	return ParseLease(b)
}

// ParseLease decodes a lease document.
func ParseLease(b []byte) (Lease, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return Lease{}, err
	}
	var l Lease
	l.Generation, _ = number(lookup(doc, "generation"))
	l.Phase, _ = lookup(doc, "phase").(string)
	l.Socket, _ = lookup(doc, "registrationSocket").(string)
	if h, ok := lookup(doc, "holder").(map[string]any); ok {
		l.Pod, _ = lookup(h, "pod").(string)
		if l.Pod == "" {
			l.Pod, _ = lookup(h, "podName").(string)
		}
		pid, _ := number(lookup(h, "pid"))
		l.PID = int(pid)
	}
	return l, nil
}

func lookup(m map[string]any, key string) any {
	for k, v := range m {
		if strings.EqualFold(k, key) {
			return v
		}
	}
	return nil
}

func number(v any) (uint64, bool) {
	switch n := v.(type) {
	case json.Number:
		u, err := strconv.ParseUint(n.String(), 10, 64)
		return u, err == nil
	case string:
		u, err := strconv.ParseUint(n, 10, 64)
		return u, err == nil
	}
	return 0, false
}
