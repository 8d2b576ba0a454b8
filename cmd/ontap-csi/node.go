package main

import (
	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/node"
)

// newNode builds the node service from the options. It does no I/O beyond
// creating its directories: node info discovery runs in the background
// (Service.Start), so nothing can delay the CSI socket or registration.
func newNode(o *options, reporter node.Reporter) (*node.Service, error) {
	if o.hostRoot != "" {
		logrus.WithField("host-root", o.hostRoot).Info("host tools run chrooted into the host root")
	}
	return node.New(node.Config{
		NodeID:             o.csiNodeName,
		Topology:           o.topology,
		MaxVolumesPerNode:  o.maxVolumesPerNode,
		KubeletDir:         o.kubeletDir,
		TrackingDir:        o.trackingDir,
		LockDir:            o.lockDir,
		HostRoot:           o.hostRoot,
		DevDir:             o.devDir,
		SysRoot:            o.sysRoot,
		Reporter:           reporter,
		InitiatorName:      o.initiatorName,
		IPs:                o.nodeIPs,
		ISCSIDeviceTimeout: o.iscsiDeviceTimeout,
		ISCSIDeadPathGrace: o.iscsiDeadGrace,
		MaxISCSIOperations: o.maxISCSIOperations,
		MaxNFSMounts:       o.maxNFSMounts,
		MaxFormats:         o.maxFormats,
	})
}
