package node

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/ontap-csi/ontap-csi/node/tracking"
)

type fakeAttachments struct {
	attached map[string]bool
	err      error
	node     string
}

func (f *fakeAttachments) AttachedVolumes(_ context.Context, node string) (map[string]bool, error) {
	f.node = node
	return f.attached, f.err
}

// A plugin that comes back cleans the volumes no longer attached to its
// node (fenced while it was away) and leaves every other volume as it was.
func TestCleanStale(t *testing.T) {
	for _, tc := range []struct {
		name     string
		attached map[string]bool
		err      error
		cleaned  []string
	}{
		{name: "both still attached: nothing touched", attached: map[string]bool{"pvc-1": true, "pvc-2": true}},
		{name: "pvc-1 fenced: only it is cleaned", attached: map[string]bool{"pvc-2": true}, cleaned: []string{"pvc-1"}},
		{name: "neither attached", attached: map[string]bool{}, cleaned: []string{"pvc-1", "pvc-2"}},
		{name: "attachments unreadable: nothing touched", err: errors.New("forbidden")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestService(t)
			ctx := context.Background()
			staging1 := ts.stageISCSI(t, "pvc-1", "ext4")
			target1 := ts.target(t, "pod-a", "pvc-1")
			if err := ts.publish("pvc-1", staging1, target1, snw, false); err != nil {
				t.Fatal(err)
			}
			staging2 := ts.stageNFS(t, "pvc-2", nfsContext)
			target2 := ts.target(t, "pod-b", "pvc-2")
			if err := ts.publish("pvc-2", staging2, target2, snw, false); err != nil {
				t.Fatal(err)
			}
			before := ts.nodeState(t)

			a := &fakeAttachments{attached: tc.attached, err: tc.err}
			cleaned, err := ts.CleanStale(ctx, a)
			if (err != nil) != (tc.err != nil) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if a.node != "node-1" {
				t.Errorf("asked for node %q", a.node)
			}
			if !slices.Equal(cleaned, tc.cleaned) {
				t.Fatalf("cleaned %v, want %v", cleaned, tc.cleaned)
			}
			if len(tc.cleaned) == 0 {
				if got := ts.nodeState(t); !slices.Equal(got, before) {
					t.Errorf("node changed:\n%v\nwas\n%v", got, before)
				}
				return
			}
			// An NFS stage only records the export: pvc-2 has no staging mount.
			for vol, paths := range map[string][]string{"pvc-1": {staging1, target1}, "pvc-2": {target2}} {
				gone := slices.Contains(tc.cleaned, vol)
				for _, p := range paths {
					if (ts.host.mountedAt(p) == nil) != gone {
						t.Errorf("%s at %s: mounted %v, want cleaned %v", vol, p, ts.host.mountedAt(p) != nil, gone)
					}
				}
				if _, err := ts.state.Read(vol); errors.Is(err, tracking.ErrNotFound) != gone {
					t.Errorf("%s tracking file: %v, want gone %v", vol, err, gone)
				}
			}
			if gone := slices.Contains(tc.cleaned, "pvc-1"); gone != (len(ts.ini.devices) == 0) {
				t.Errorf("iSCSI devices left %v, pvc-1 cleaned %v", ts.ini.devices, gone)
			}
			// The repeat finds nothing more to clean.
			again, err := ts.CleanStale(ctx, a)
			if err != nil || len(again) != 0 {
				t.Errorf("repeat: %v, cleaned %v", err, again)
			}
		})
	}
}
