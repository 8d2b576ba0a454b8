package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// nodeCall makes one CSI Node call on endpoint the way kubelet does: a new
// connection per operation, to whatever process serves the path now.
func nodeCall(ctx context.Context, endpoint string, f func(context.Context, csi.NodeClient) error) error {
	conn, err := grpc.NewClient("unix://"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return f(ctx, csi.NewNodeClient(conn))
}

// published is a volume staged and published on the node.
type published struct {
	label   string // "NFS", "iSCSI"
	id      string
	staging string
	target  string
	stage   *csi.NodeStageVolumeRequest
}

// load is the stream of kubelet-style calls that runs through the
// rollouts: the volume-stats poll kubelet runs for every mounted volume, and
// a pod that keeps mounting and unmounting a volume (NodePublishVolume and
// NodeUnpublishVolume on a second target).
type load struct {
	endpoint string
	vols     []published
	churn    published // NodePublish/Unpublish of churnTarget over its staging
	target   string

	mu                     sync.Mutex
	stats, mounts, unmount int
	failures               []string

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startLoad(endpoint string, vols []published, churnTarget string) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{endpoint: endpoint, vols: vols, churn: vols[0], target: churnTarget, cancel: cancel}
	l.wg.Add(2)
	go func() {
		defer l.wg.Done()
		for tick := time.NewTicker(20 * time.Millisecond); ctx.Err() == nil; <-tick.C {
			for _, v := range l.vols {
				err := nodeCall(ctx, endpoint, func(ctx context.Context, n csi.NodeClient) error {
					_, err := n.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: v.id, VolumePath: v.target})
					return err
				})
				l.record(ctx, &l.stats, "NodeGetVolumeStats "+v.label, err)
			}
		}
	}()
	go func() {
		defer l.wg.Done()
		for ctx.Err() == nil {
			err := nodeCall(ctx, endpoint, func(ctx context.Context, n csi.NodeClient) error {
				_, err := n.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
					VolumeId: l.churn.id, StagingTargetPath: l.churn.staging, TargetPath: l.target,
					VolumeCapability: l.churn.stage.VolumeCapability, PublishContext: l.churn.stage.PublishContext,
					VolumeContext: l.churn.stage.VolumeContext,
				})
				return err
			})
			l.record(ctx, &l.mounts, "NodePublishVolume (mount)", err)
			err = nodeCall(ctx, endpoint, func(ctx context.Context, n csi.NodeClient) error {
				_, err := n.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: l.churn.id, TargetPath: l.target})
				return err
			})
			l.record(ctx, &l.unmount, "NodeUnpublishVolume (unmount)", err)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return l
}

func (l *load) record(ctx context.Context, n *int, what string, err error) {
	if ctx.Err() != nil {
		return // stopping: a cancelled call is not a failure of the driver
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	*n++
	if err != nil {
		l.failures = append(l.failures, fmt.Sprintf("%s %s: %v", time.Now().Format("15:04:05.000"), what, err))
	}
}

// stop ends the stream once its calls in flight have returned, and leaves
// the churn target unmounted.
func (l *load) stop() {
	l.cancel()
	l.wg.Wait()
	_ = nodeCall(context.Background(), l.endpoint, func(ctx context.Context, n csi.NodeClient) error {
		_, err := n.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: l.churn.id, TargetPath: l.target})
		return err
	})
}

func (l *load) counts() (stats, mounts, unmounts int, failures []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats, l.mounts, l.unmount, append([]string(nil), l.failures...)
}

// kubeletPaths are kubelet's staging and target paths of a volume.
func kubeletPaths(kubeletDir, volumeID, podUID string) (staging, target string, err error) {
	staging = filepath.Join(kubeletDir, "plugins/kubernetes.io/csi", driver, volumeID, "globalmount")
	target = filepath.Join(kubeletDir, "pods", podUID, "volumes/kubernetes.io~csi", volumeID, "mount")
	// kubelet creates the staging dir and the target's parent; the plugin
	// creates the target.
	if err = os.MkdirAll(staging, 0o750); err == nil {
		err = os.MkdirAll(filepath.Dir(target), 0o750)
	}
	return staging, target, err
}
