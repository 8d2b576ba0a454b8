package server

import (
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
)

func TestSanitizeStripsSecrets(t *testing.T) {
	req := &csi.NodeStageVolumeRequest{
		VolumeId: "pvc-1",
		PublishContext: map[string]string{
			"protocol":             "block",
			"iscsiInitiatorSecret": "chap-init-secret",
			"iscsiTargetSecret":    "chap-target-secret",
			"iscsiUsername":        "chapuser",
		},
		Secrets:       map[string]string{"luks-passphrase": "luks-secret"},
		VolumeContext: map[string]string{"internalName": "trident_pvc_1"},
	}
	orig := proto.Clone(req)
	text := sanitizedText(req)
	for _, secret := range []string{"chap-init-secret", "chap-target-secret", "luks-secret"} {
		if strings.Contains(text, secret) {
			t.Errorf("sanitized text leaks %q: %s", secret, text)
		}
	}
	for _, keep := range []string{"pvc-1", "block", "trident_pvc_1", "luks-passphrase", "iscsiInitiatorSecret", "chapuser"} {
		if !strings.Contains(text, keep) {
			t.Errorf("sanitized text lost %q: %s", keep, text)
		}
	}
	if !proto.Equal(req, orig) {
		t.Error("Sanitize modified the request it was given")
	}

	create := &csi.CreateVolumeRequest{
		Name:    "pvc-2",
		Secrets: map[string]string{"password": "hunter2"},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "pvc-1/snap"},
		}},
	}
	if s := sanitizedText(create); strings.Contains(s, "hunter2") || !strings.Contains(s, "pvc-1/snap") {
		t.Errorf("CreateVolume sanitized wrongly: %s", s)
	}
	if Sanitize(nil) != nil {
		t.Error("Sanitize(nil) != nil")
	}
}
