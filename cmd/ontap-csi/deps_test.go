package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The product binary, and so the image, carries no test code: the ONTAP
// simulator is its own command (cmd/ontap-sim), and test/ holds only what
// the tests run.
func TestProductHasNoTestCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps listed %d packages; expected the whole dependency tree", len(deps))
	}
	for _, pkg := range deps {
		if strings.HasPrefix(pkg, "github.com/ontap-csi/ontap-csi/test/") {
			t.Errorf("ontap-csi depends on test package %s", pkg)
		}
	}
}
