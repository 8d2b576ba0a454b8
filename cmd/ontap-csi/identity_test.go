package main

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// CSI Probe answers ready in every role as soon as CSI is served: it waits
// for neither kubelet registration (node) nor a backend (controller). See
// server.Identity.Probe for why.
func TestCSIProbePerRole(t *testing.T) {
	t.Run("node not registered with kubelet", func(t *testing.T) {
		t.Parallel()
		dir := shortTempDir(t)
		sock := filepath.Join(dir, "plugin", "csi.sock")
		p := start(t, []string{"--csi_role=node", "--csi_node_name=n1", "--csi_endpoint=unix://" + sock,
			"--kubelet-dir=" + filepath.Join(dir, "kubelet"), "--tracking-dir=" + filepath.Join(dir, "tracking"),
			"--metrics-address=127.0.0.1:0", "--handover-grace=0s"}, nil, false)
		conn := dial(t, p, sock)
		assertProbeReady(t, conn)
		// No kubelet completes the registration: the pod is not ready, and
		// its /readyz, not Probe, says so.
		if code := statusOf(t, "http://"+metricsAddr(t, p)+"/readyz"); code != http.StatusServiceUnavailable {
			t.Errorf("/readyz of an unregistered node plugin: %d, want 503", code)
		}
		assertProbeReady(t, conn)
		if code := p.stop(t); code != 0 {
			t.Fatalf("exit %d", code)
		}
	})
	t.Run("controller without a backend", func(t *testing.T) {
		t.Parallel()
		dir := shortTempDir(t)
		sock := filepath.Join(dir, "csi.sock")
		p := start(t, []string{"--csi_role=controller", "--csi_endpoint=unix://" + sock}, nil, false)
		conn := dial(t, p, sock)
		assertProbeReady(t, conn)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := csi.NewControllerClient(conn).CreateVolume(ctx, &csi.CreateVolumeRequest{
			Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{{
				AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
				AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
			}},
		})
		if status.Code(err) != codes.Unavailable {
			t.Errorf("CreateVolume without a backend: %v, want Unavailable", err)
		}
		if code := p.stop(t); code != 0 {
			t.Fatalf("exit %d", code)
		}
	})
}

func assertProbeReady(t *testing.T, conn *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{})
	if err != nil || !resp.GetReady().GetValue() {
		t.Fatalf("Probe = %v, %v; want ready", resp, err)
	}
}

func statusOf(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The plugin capabilities of each role, written out, so that a change to
// them fails here: the node plugin has no controller service.
func TestPluginCapabilitiesPerRole(t *testing.T) {
	controller := []string{"service VOLUME_ACCESSIBILITY_CONSTRAINTS", "service CONTROLLER_SERVICE", "service GROUP_CONTROLLER_SERVICE", "volume expansion ONLINE"}
	for role, want := range map[string][]string{
		roleNode:       {"service VOLUME_ACCESSIBILITY_CONSTRAINTS"},
		roleController: controller,
		roleAllInOne:   controller,
	} {
		var got []string
		for _, c := range pluginCapabilities(role) {
			switch {
			case c.GetService() != nil:
				got = append(got, "service "+c.GetService().GetType().String())
			case c.GetVolumeExpansion() != nil:
				got = append(got, "volume expansion "+c.GetVolumeExpansion().GetType().String())
			default:
				got = append(got, c.String())
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("role %s advertises %q, want %q", role, got, want)
		}
	}
}
