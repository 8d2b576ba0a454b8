// Command tridentmain stands in for Trident's trident-main node container
// in the legacy scenarios: a plain CSI node server on --csi_endpoint with no
// registration of its own (node-driver-registrar does that).
//
// Like Trident it removes a stale socket at start, and its Go listener
// unlinks the socket when the server stops on SIGTERM, whoever's it is by
// then.
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
	"strings"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const driver = "csi.trident.netapp.io"

func main() {
	endpoint := flag.String("csi_endpoint", "", "unix:// CSI endpoint")
	nodeName := flag.String("csi_node_name", "", "node name, returned by NodeGetInfo")
	flag.Parse()
	log.SetFlags(log.Lmicroseconds)
	path, ok := strings.CutPrefix(*endpoint, "unix://")
	if !ok {
		log.Fatalf("--csi_endpoint must be unix://<path>, got %q", *endpoint)
	}

	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Fatalf("removing %s: %v", path, err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		log.Fatalf("listening on %s: %v", path, err)
	}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, identity{})
	csi.RegisterNodeServer(srv, node{nodeID: *nodeName})

	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sigc
		log.Printf("stopping; the listener unlinks %s", path)
		srv.GracefulStop()
	}()
	log.Printf("serving CSI on %s", path)
	if err := srv.Serve(lis); err != nil {
		log.Fatal(err)
	}
}

type identity struct {
	csi.UnimplementedIdentityServer
}

func (identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: driver, VendorVersion: "20.10.0"}, nil
}

func (identity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

func (identity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

type node struct {
	csi.UnimplementedNodeServer
	nodeID string
}

func (n node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: n.nodeID}, nil
}

func (node) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	rpc := func(t csi.NodeServiceCapability_RPC_Type) *csi.NodeServiceCapability {
		return &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}}}
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{
		rpc(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME),
		rpc(csi.NodeServiceCapability_RPC_EXPAND_VOLUME),
		rpc(csi.NodeServiceCapability_RPC_GET_VOLUME_STATS),
	}}, nil
}

func (node) NodeGetVolumeStats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	return nil, status.Errorf(codes.NotFound, "volume %s is not published on this node", req.GetVolumeId())
}
