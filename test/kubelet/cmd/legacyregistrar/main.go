// Command legacyregistrar behaves as node-driver-registrar v2.x does towards
// kubelet, for the S8 and S9 scenarios (docs/design/registration.md §7.6):
//
//   - it waits until the CSI driver answers GetPluginInfo on --csi-address,
//   - then removes whatever sits at its fixed socket path
//     <registration-dir>/<driver>-reg.sock and listens there,
//   - GetInfo advertises the hard-coded version 1.0.0 and the endpoint
//     --kubelet-registration-path,
//   - NotifyRegistrationStatus(false) makes it exit 1,
//   - SIGTERM makes it unlink the socket by path, without checking whose
//     socket it is, and exit 0.
//
// That last step is the seed bug: the old pod's registrar deletes the new
// pod's socket.
package main

import (
	"context"
	"errors"
	"flag"
	"io/fs"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

func main() {
	regDir := flag.String("registration-dir", "/registration", "kubelet's plugins_registry directory")
	driver := flag.String("driver", "csi.trident.netapp.io", "CSI driver name")
	endpoint := flag.String("kubelet-registration-path", "", "CSI endpoint on the host, told to kubelet")
	csiAddress := flag.String("csi-address", "", "CSI socket to wait for before registering (default: --kubelet-registration-path)")
	// Trident's DaemonSets run node-driver-registrar with --v=2 (klog's
	// verbosity); accepted so that their arguments start this emulation
	// unchanged (test/cluster's scenario 9).
	_ = flag.Int("v", 0, "log verbosity, as node-driver-registrar's klog flag (ignored)")
	flag.Parse()
	if *csiAddress == "" {
		*csiAddress = *endpoint
	}
	log.SetFlags(log.Lmicroseconds)

	waitForDriver(*csiAddress)

	socket := filepath.Join(*regDir, *driver+"-reg.sock")
	if err := os.Remove(socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Fatalf("removing %s: %v", socket, err)
	}
	syscall.Umask(0o077)
	lis, err := net.Listen("unix", socket)
	if err != nil {
		log.Fatalf("listening on %s: %v", socket, err)
	}
	log.Printf("registration socket %s listening", socket)

	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, &registrar{driver: *driver, endpoint: *endpoint})

	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGTERM)
	go func() {
		<-sigc
		log.Printf("SIGTERM: removing %s", socket)
		if err := os.Remove(socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Printf("removing %s: %v", socket, err)
			os.Exit(1)
		}
		os.Exit(0)
	}()
	if err := srv.Serve(lis); err != nil {
		log.Fatal(err)
	}
}

// waitForDriver blocks until the CSI driver answers, as the registrar only
// registers a driver whose name it has read from GetPluginInfo.
func waitForDriver(address string) {
	for {
		if err := probe(address); err == nil {
			return
		} else {
			log.Printf("waiting for the CSI driver at %s: %v", address, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func probe(address string) error {
	conn, err := grpc.NewClient("unix://"+address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	return err
}

type registrar struct {
	registerapi.UnimplementedRegistrationServer
	driver, endpoint string
}

func (r *registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	log.Printf("GetInfo")
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              r.driver,
		Endpoint:          r.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (r *registrar) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if !s.PluginRegistered {
		log.Printf("Registration process failed with error: %s, restarting registration container.", s.Error)
		os.Exit(1)
	}
	log.Printf("Received NotifyRegistrationStatus call: %+v", s)
	return &registerapi.RegistrationStatusResponse{}, nil
}
