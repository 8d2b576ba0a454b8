// The handover scenarios of docs/design/registration.md §6 against the kubelet code of
// k8s.io/kubernetes v1.29.15. Each scenario runs in a process of its own;
// see harness/scenario.
package k8s129_test

import (
	"testing"

	"github.com/ontap-csi/ontap-csi/test/kubelet/harness/scenario"
	"github.com/ontap-csi/ontap-csi/test/kubelet/k8s-1.29/realkubelet"
)

func TestS1(t *testing.T)  { scenario.Run(t, scenario.S1, realkubelet.New) }
func TestS2(t *testing.T)  { scenario.Run(t, scenario.S2, realkubelet.New) }
func TestS3(t *testing.T)  { scenario.Run(t, scenario.S3, realkubelet.New) }
func TestS4(t *testing.T)  { scenario.Run(t, scenario.S4, realkubelet.New) }
func TestS5(t *testing.T)  { scenario.Run(t, scenario.S5, realkubelet.New) }
func TestS6(t *testing.T)  { scenario.Run(t, scenario.S6, realkubelet.New) }
func TestS7(t *testing.T)  { scenario.Run(t, scenario.S7, realkubelet.New) }
func TestS8(t *testing.T)  { scenario.Run(t, scenario.S8, realkubelet.New) }
func TestS8o(t *testing.T) { scenario.Run(t, scenario.S8o, realkubelet.New) }
func TestS9(t *testing.T)  { scenario.Run(t, scenario.S9, realkubelet.New) }
func TestS10(t *testing.T) { scenario.Run(t, scenario.S10, realkubelet.New) }
func TestS11(t *testing.T) { scenario.Run(t, scenario.S11, realkubelet.New) }
func TestS12(t *testing.T) { scenario.Run(t, scenario.S12, realkubelet.New) }

// TestBenchmark measures S1–S3 against the legacy registrar:
// go test -run '^TestBenchmark$' -timeout 0 -v -args -bench-runs=20
func TestBenchmark(t *testing.T) { scenario.Bench(t, realkubelet.New) }

// TestM1: the legacy socket re-created after a migration (see scenario.M1).
func TestM1(t *testing.T) { scenario.Run(t, scenario.M1, realkubelet.New) }
