// Package standin is what the two sidecar stand-ins (cmd/csi-provisioner,
// cmd/csi-resizer) share with the real sidecars they replace: the command
// line the controller Deployment gives every sidecar, the CSI connection
// (wait until the driver answers Probe), the in-cluster client, and leader
// election on a Lease named as csi-lib-utils names it.
package standin

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// Flags are the sidecar arguments deploy/ renders (Trident 26.06's), so a
// stand-in runs with its container's args unchanged. Flags a stand-in has
// no use for (retry intervals) are accepted and ignored.
type Flags struct {
	CSIAddress     string
	Timeout        time.Duration
	Workers        int
	KubeAPIQPS     float64
	KubeAPIBurst   int
	LeaderElection bool
	LeaseNamespace string
}

// Register adds the common flags to fs; workersFlag is the sidecar's name
// for its worker count (--worker-threads, --workers).
func (f *Flags) Register(fs *flag.FlagSet, workersFlag string) {
	klog.InitFlags(fs)
	fs.StringVar(&f.CSIAddress, "csi-address", "/run/csi/socket", "the CSI driver's socket")
	fs.DurationVar(&f.Timeout, "timeout", 10*time.Second, "timeout of each CSI call")
	fs.IntVar(&f.Workers, workersFlag, 10, "concurrent operations")
	fs.Float64Var(&f.KubeAPIQPS, "kube-api-qps", 5, "QPS to the API server")
	fs.IntVar(&f.KubeAPIBurst, "kube-api-burst", 10, "burst to the API server")
	fs.BoolVar(&f.LeaderElection, "leader-election", false, "elect a leader among the replicas")
	fs.StringVar(&f.LeaseNamespace, "leader-election-namespace", "", "namespace of the Lease (default: the pod's)")
	fs.Duration("retry-interval-start", time.Second, "ignored: the stand-ins retry through their work queues")
	fs.Duration("retry-interval-max", 5*time.Minute, "ignored")
}

// Connect dials the driver and waits until it answers Probe, as the
// sidecars do at start (the driver container may start later).
func Connect(ctx context.Context, address string) (*grpc.ClientConn, string, error) {
	target := address
	if !strings.HasPrefix(target, "unix:") {
		target = "unix://" + target
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, "", err
	}
	id := csi.NewIdentityClient(conn)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		info, err := id.GetPluginInfo(cctx, &csi.GetPluginInfoRequest{})
		if err == nil {
			_, err = id.Probe(cctx, &csi.ProbeRequest{})
		}
		cancel()
		if err == nil {
			return conn, info.GetName(), nil
		}
		klog.Infof("waiting for the CSI driver at %s: %v", address, err)
		select {
		case <-ctx.Done():
			conn.Close()
			return nil, "", ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// Client is the in-cluster client with the sidecar's QPS and burst.
func (f *Flags) Client() (kubernetes.Interface, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = float32(f.KubeAPIQPS), f.KubeAPIBurst
	return kubernetes.NewForConfig(cfg)
}

// LockName is a Lease name as csi-lib-utils makes it: the prefix and the
// driver name with everything but letters, digits and '-' replaced.
func LockName(prefix, driver string) string {
	name := regexp.MustCompile(`[^a-zA-Z0-9-]`).ReplaceAllString(driver, "-")
	if prefix != "" {
		name = prefix + "-" + name
	}
	return name
}

// Run runs run, under leader election when it is on: only the holder of
// the Lease works, and a holder that loses it exits (its container
// restarts and campaigns again), as csi-lib-utils' sidecars do.
func (f *Flags) Run(ctx context.Context, client kubernetes.Interface, lockName string, run func(context.Context)) error {
	if !f.LeaderElection {
		run(ctx)
		return nil
	}
	ns := f.LeaseNamespace
	if ns == "" {
		b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
		if err != nil {
			return fmt.Errorf("the pod's namespace for the Lease: %w", err)
		}
		ns = strings.TrimSpace(string(b))
	}
	id, err := os.Hostname()
	if err != nil {
		return err
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: lockName},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: 15 * time.Second,
		RenewDeadline: 10 * time.Second,
		RetryPeriod:   5 * time.Second,
		// A replica shutting down hands the Lease back at once.
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				klog.Infof("became leader (Lease %s/%s)", ns, lockName)
				run(ctx)
			},
			OnStoppedLeading: func() {
				if ctx.Err() != nil {
					klog.Infof("released the Lease %s/%s on shutdown", ns, lockName)
					return
				}
				klog.Errorf("lost the Lease %s/%s", ns, lockName)
				klog.FlushAndExit(klog.ExitFlushTimeout, 1)
			},
		},
	})
	return nil
}
