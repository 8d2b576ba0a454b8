package e2e

// The node benchmark on a real kernel (TestNodeBenchmark with
// plugintest.RealKernel; make bench runs it in the VM of test/vm): the
// real iscsiadm, udev, dm-multipath and NFS client against the
// simulator's kernel data plane (LIO, nfsd). The arms and the report are
// the shims' (bench_test.go, bench_raw_test.go); only the sizes differ:
// QEMU TCG with 2 vCPUs on a shared 2-core machine takes seconds per
// iSCSI volume, and 50 at once ran past the call deadline (docs/benchmarks.md).

// kernelBenchCases are the concurrencies on a real kernel: n volumes per
// arm and round.
var kernelBenchCases = []benchCase{{conc: 1, n: 3, rounds: 4}, {conc: 20, n: 20, rounds: 2}}

// kernelBenchSetting says where the real kernel's figures come from.
const kernelBenchSetting = "In the VM of test/vm (Debian 12's kernel under QEMU TCG, 2 vCPUs), the simulator's kernel data plane (LIO, nfsd) on loopback"
