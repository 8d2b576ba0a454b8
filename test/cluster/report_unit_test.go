package cluster_test

import (
	"strings"
	"testing"
	"time"
)

// The report's ONTAP and failed-operation views, without a cluster: a view
// that always says "none" or lists everything would hide what the
// scenarios are judged by.

func TestOntapObjectsAbout(t *testing.T) {
	objs := ontapObjects{
		"export-policy e2e_pvc_a [10.250.0.10]",
		"igroup e2e-node-1-x [iqn.e2e:e2e-node-1]",
		"lun /vol/e2e_pvc_b/lun0",
		"lun-map /vol/e2e_pvc_b/lun0 -> e2e-node-1-x (LUN 0)",
		"snapshot e2e_pvc_a@snap",
		"volume e2e_pvc_a",
		"volume e2e_pvc_b",
		"volume e2e_pvc_c",
	}
	for _, tc := range []struct {
		vols []string
		want []string
	}{
		{nil, nil},
		{[]string{"e2e_pvc_z"}, nil},
		{[]string{"e2e_pvc_a"}, []string{"export-policy e2e_pvc_a [10.250.0.10]", "snapshot e2e_pvc_a@snap", "volume e2e_pvc_a"}},
		{[]string{"e2e_pvc_b", "e2e_pvc_c"}, []string{"lun /vol/e2e_pvc_b/lun0", "lun-map /vol/e2e_pvc_b/lun0 -> e2e-node-1-x (LUN 0)", "volume e2e_pvc_b", "volume e2e_pvc_c"}},
	} {
		got := objs.about(tc.vols)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("about(%v) = %q, want %q", tc.vols, got, tc.want)
		}
	}
}

func TestOntapSeenDuring(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 22, 0, 0, 0, time.UTC)
	o := &ontap{seen: []ontapListing{
		{At: t0, Objects: ontapObjects{"volume e2e_pvc_a"}},
		{At: t0.Add(time.Second), Objects: ontapObjects{"lun /vol/e2e_pvc_a/lun0", "volume e2e_pvc_a", "volume e2e_pvc_b"}},
		{At: t0.Add(2 * time.Second), Objects: ontapObjects{"lun-map /vol/e2e_pvc_a/lun0 -> ig (LUN 0)"}},
		{At: t0.Add(3 * time.Second), Objects: ontapObjects{"snapshot e2e_pvc_a@late"}},
	}}
	got := o.seenDuring(t0.Add(time.Second), t0.Add(2*time.Second), []string{"e2e_pvc_a"})
	want := []string{"lun /vol/e2e_pvc_a/lun0", "lun-map /vol/e2e_pvc_a/lun0 -> ig (LUN 0)", "volume e2e_pvc_a"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("seenDuring = %q, want %q", got, want)
	}
}

func TestFailedOps(t *testing.T) {
	for _, tc := range []struct {
		name    string
		records []record
		want    string
	}{
		{"none", []record{{Source: "kubelet", Text: "e2e-node-1: registered"}, {Source: "event", Text: "Normal Started"}}, "none"},
		{"per node and class", []record{
			{Source: "kubelet", Class: classNotServed, Text: "e2e-node-2: Operation failed"},
			{Source: "kubelet", Class: classNotServed, Text: "e2e-node-2: Operation failed"},
			{Source: "kubelet", Class: classUnregistered, Text: "e2e-node-1: not found in the list of registered CSI drivers"},
			{Source: "event", Class: classOther, Text: "Warning FailedMount Pod s4/writer"},
			{Source: "kubelet", Class: classOther, Text: "e2e-node-2: Operation failed"},
		}, "e2e-node-1 kubelet: 1 driver not registered; e2e-node-2 kubelet: 1 other, 2 endpoint not served; events: 1 other"},
	} {
		if got := failedOps(tc.records); got != tc.want {
			t.Errorf("%s: failedOps = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestOntapObjectsDiff(t *testing.T) {
	before := ontapObjects{"igroup n2 [iqn]", "volume a", "volume b"}
	after := ontapObjects{"volume a", "volume b", "volume c"}
	added, removed := before.diff(after)
	if strings.Join(added, "|") != "volume c" || strings.Join(removed, "|") != "igroup n2 [iqn]" {
		t.Errorf("diff = +%q -%q, want +[volume c] -[igroup n2 [iqn]]", added, removed)
	}
	if added, removed := after.diff(after); len(added)+len(removed) != 0 {
		t.Errorf("diff of a listing with itself = +%q -%q", added, removed)
	}
}
