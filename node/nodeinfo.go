package node

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/node/iscsi"
)

// Reporter hands the node's info to the controller: in-process in allInOne,
// Trident's PUT /trident/v1/node/<name> or a Node annotation otherwise
// (package nodeinfo).
type Reporter interface {
	ReportNode(ctx context.Context, info backends.Node) error
}

// ReporterFunc adapts a function to Reporter.
type ReporterFunc func(ctx context.Context, info backends.Node) error

// ReportNode implements Reporter.
func (f ReporterFunc) ReportNode(ctx context.Context, info backends.Node) error { return f(ctx, info) }

// Backoff of the node report: Trident 20.10 retried from 1 s up to 5 s,
// 26.06 from 10 s up to 120 s (slow to recover after a controller restart,
// Trident #1061). Start fast, settle at a minute.
const (
	reportBackoffStart = time.Second
	reportBackoffMax   = time.Minute
)

// Start runs the node's background work — reporting the node info to the
// Reporter until it succeeds — and returns at once: nothing here may hold up
// the CSI socket, NodeGetInfo or kubelet registration (Trident #727, #1061).
func (s *Service) Start(ctx context.Context) {
	if s.cfg.Reporter == nil {
		return
	}
	go s.reportNode(ctx)
}

func (s *Service) reportNode(ctx context.Context) {
	log := logrus.WithField("node", s.cfg.NodeID)
	delay := reportBackoffStart
	for attempt := 1; ; attempt++ {
		// Discover again on every attempt: an address may come up late.
		info := s.discoverNodeInfo(log)
		err := s.cfg.Reporter.ReportNode(ctx, info)
		if err == nil {
			log.WithFields(logrus.Fields{"iqn": info.IQN, "ips": info.IPs, "attempts": attempt}).Info("node info reported to the controller")
			return
		}
		log.WithError(err).WithField("retryIn", delay).Warn("reporting node info to the controller failed")
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, reportBackoffMax)
	}
}

func (s *Service) discoverNodeInfo(log *logrus.Entry) backends.Node {
	info := backends.Node{Name: s.cfg.NodeID, IQN: s.cfg.InitiatorName, IPs: slices.Clone(s.cfg.IPs)}
	if info.IQN == "" {
		iqn, err := iscsi.ReadInitiatorName(filepath.Join(hostRootOr(s.cfg.HostRoot), iscsi.InitiatorNameFile))
		switch {
		case err == nil:
			info.IQN = iqn
		case errors.Is(err, os.ErrNotExist):
			log.Debug("no iSCSI initiator name on this host; iSCSI volumes cannot be attached here")
		default:
			log.WithError(err).Warn("cannot read the iSCSI initiator name")
		}
	}
	if len(info.IPs) == 0 {
		ips, err := nodeIPs("/proc/net/route", "/proc/net/ipv6_route")
		if err != nil {
			log.WithError(err).Warn("cannot list the node's IP addresses")
		}
		info.IPs = ips
	}
	return info
}

func hostRootOr(root string) string {
	if root == "" {
		return "/"
	}
	return root
}

// nodeIPs returns the global unicast addresses of the interfaces that carry
// a default route (Trident 21.01+, #468: all addresses brought in dummy and
// container interfaces). With no default route, every up interface counts.
func nodeIPs(routeV4, routeV6 string) ([]string, error) {
	names, err := defaultRouteInterfaces(routeV4, routeV6)
	if err != nil {
		return nil, err
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var ips []string
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		if len(names) > 0 && !slices.Contains(names, ifc.Name) {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.IsGlobalUnicast() {
				ips = append(ips, ipn.IP.String())
			}
		}
	}
	slices.Sort(ips)
	return slices.Compact(ips), nil
}

// defaultRouteInterfaces reads the kernel's routing tables (the host's: the
// node plugin runs with hostNetwork) for the interfaces of default routes.
func defaultRouteInterfaces(routeV4, routeV6 string) ([]string, error) {
	var names []string
	v4, err := os.ReadFile(routeV4)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	names = append(names, parseDefaultRoutesV4(v4)...)
	v6, err := os.ReadFile(routeV6)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	names = append(names, parseDefaultRoutesV6(v6)...)
	slices.Sort(names)
	return slices.Compact(names), nil
}

// parseDefaultRoutesV4 parses /proc/net/route: a header line, then
// "Iface Destination Gateway Flags ... Mask ..." in hex.
func parseDefaultRoutesV4(data []byte) []string {
	var names []string
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for first := true; sc.Scan(); first = false {
		f := strings.Fields(sc.Text())
		if first || len(f) < 8 {
			continue
		}
		if f[1] == "00000000" && f[7] == "00000000" {
			names = append(names, f[0])
		}
	}
	return names
}

// parseDefaultRoutesV6 parses /proc/net/ipv6_route: destination, prefix
// length, ..., interface name last. ::/0 through the loopback is the
// kernel's unreachable default, not a route.
func parseDefaultRoutesV6(data []byte) []string {
	var names []string
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			continue
		}
		if f[0] == strings.Repeat("0", 32) && f[1] == "00" && f[9] != "lo" {
			names = append(names, f[9])
		}
	}
	return names
}
