package localcluster

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestImageLayerLinks checks that an image's Links become symbolic links
// in its layer, with their parent directories, beside its files: what
// Trident's objects need of the ontap-csi image (/trident_orchestrator,
// /bin/tridentctl).
func TestImageLayerLinks(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ontap-csi")
	if err := os.WriteFile(bin, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	img := Image{
		Files: map[string]string{"/ontap-csi": bin},
		Links: map[string]string{"/trident_orchestrator": "ontap-csi", "/bin/tridentctl": "../ontap-csi"},
	}
	layer, err := img.layer()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]tar.Header{}
	tr := tar.NewReader(bytes.NewReader(layer))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = *h
	}
	for name, want := range map[string]struct {
		typ  byte
		link string
	}{
		"bin/":                 {tar.TypeDir, ""},
		"ontap-csi":            {tar.TypeReg, ""},
		"trident_orchestrator": {tar.TypeSymlink, "ontap-csi"},
		"bin/tridentctl":       {tar.TypeSymlink, "../ontap-csi"},
	} {
		h, ok := got[name]
		if !ok {
			t.Errorf("layer has no %s: %v", name, got)
			continue
		}
		if h.Typeflag != want.typ || h.Linkname != want.link {
			t.Errorf("%s: type %c link %q, want type %c link %q", name, h.Typeflag, h.Linkname, want.typ, want.link)
		}
	}
}
