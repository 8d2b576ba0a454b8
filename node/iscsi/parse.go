package iscsi

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// Everything parsed here comes from tools and kernel files whose output we
// do not control (iscsiadm versions differ, sysfs attributes can be stale or
// truncated), so the parsers are strict: a line or value that does not have
// the expected shape is an error, never a guess.

// defaultPort is the IANA iSCSI port; publish contexts usually omit it.
const defaultPort = "3260"

// session is one iSCSI session as `iscsiadm -m session` lists it.
type session struct {
	ID        int    // the SID: /sys/class/iscsi_session/session<ID>
	Transport string // "tcp", "iser", ...
	Portal    string // normalized "host:port"
	TPGT      int
	Target    string // target IQN
}

// sessionLine is print level 0 of `iscsiadm -m session`:
//
//	tcp: [3] 10.0.0.1:3260,1029 iqn.1992-08.com.netapp:sn.x:vs.3 (non-flash)
//	tcp: [4] [fd20::11]:3260,1030 iqn.1992-08.com.netapp:sn.x:vs.3 (non-flash)
var sessionLine = regexp.MustCompile(`^([A-Za-z0-9_]+): \[([0-9]{1,9})\] (\S+),([0-9]{1,9}) (\S+)(?: \([A-Za-z -]*\))?$`)

// parseSessions parses `iscsiadm -m session` output (print level 0).
func parseSessions(out []byte) ([]session, error) {
	var sessions []session
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		m := sessionLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("iscsiadm session list: unexpected line %q", truncate(line, 120))
		}
		sid, _ := strconv.Atoi(m[2])
		tpgt, _ := strconv.Atoi(m[4])
		portal, err := normalizePortal(m[3])
		if err != nil {
			return nil, fmt.Errorf("iscsiadm session list: session %d: %w", sid, err)
		}
		if err := validateIQN(m[5]); err != nil {
			return nil, fmt.Errorf("iscsiadm session list: session %d: %w", sid, err)
		}
		sessions = append(sessions, session{ID: sid, Transport: m[1], Portal: portal, TPGT: tpgt, Target: m[5]})
	}
	return sessions, nil
}

// nodeRecord is a node record as `iscsiadm -m node` lists it.
type nodeRecord struct {
	Portal string // normalized "host:port"
	Target string
}

// nodeLine is one line of `iscsiadm -m node`. A record made with "-o new"
// has no portal group tag, which open-iscsi 2.1 prints as its unsigned
// form of -1 (older versions print -1):
//
//	10.0.0.1:3260,1029 iqn.1992-08.com.netapp:sn.x:vs.3
//	10.0.0.1:3260,4294967295 iqn.1992-08.com.netapp:sn.x:vs.3
//	10.0.0.1:3260,-1 iqn.1992-08.com.netapp:sn.x:vs.3
var nodeLine = regexp.MustCompile(`^(\S+),(-1|[0-9]{1,9}|4294967295) (\S+)$`)

// parseNodeRecords parses `iscsiadm -m node` output.
func parseNodeRecords(out []byte) ([]nodeRecord, error) {
	var recs []nodeRecord
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		m := nodeLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("iscsiadm node list: unexpected line %q", truncate(line, 120))
		}
		portal, err := normalizePortal(m[1])
		if err != nil {
			return nil, fmt.Errorf("iscsiadm node list: %w", err)
		}
		if err := validateIQN(m[3]); err != nil {
			return nil, fmt.Errorf("iscsiadm node list: %w", err)
		}
		recs = append(recs, nodeRecord{Portal: portal, Target: m[3]})
	}
	return recs, nil
}

var hostnameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)

// normalizePortal turns "ip", "ip:port", "[ipv6]", "[ipv6]:port", a bare
// IPv6 address or "host[:port]" into the canonical "host:port" form that
// iscsiadm prints, so portals from a publish context and from the session
// list compare equal.
func normalizePortal(p string) (string, error) {
	if p == "" || len(p) > 300 {
		return "", fmt.Errorf("invalid portal %q", truncate(p, 64))
	}
	host, port := p, defaultPort
	switch {
	case strings.HasPrefix(p, "["):
		end := strings.Index(p, "]")
		if end < 0 {
			return "", fmt.Errorf("invalid portal %q", truncate(p, 64))
		}
		host = p[1:end]
		if rest := p[end+1:]; rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return "", fmt.Errorf("invalid portal %q", truncate(p, 64))
			}
			port = rest[1:]
		}
	case strings.Count(p, ":") == 1:
		host, port, _ = strings.Cut(p, ":")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return "", fmt.Errorf("invalid portal %q: bad port", truncate(p, 64))
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		if addr.Zone() != "" {
			return "", fmt.Errorf("invalid portal %q: zoned address", truncate(p, 64))
		}
		return net.JoinHostPort(addr.Unmap().String(), port), nil
	}
	if strings.HasPrefix(p, "[") || !hostnameRE.MatchString(host) {
		return "", fmt.Errorf("invalid portal %q", truncate(p, 64))
	}
	return strings.ToLower(host) + ":" + port, nil
}

// validateIQN accepts the iSCSI name forms of RFC 3720 §3.2.6 (iqn., eui.,
// naa.) loosely: what matters here is that the name is one argv item that
// cannot be mistaken for an option and contains nothing unprintable.
func validateIQN(s string) error {
	if len(s) < 5 || len(s) > 223 {
		return fmt.Errorf("invalid iSCSI name %q: length", truncate(s, 64))
	}
	switch strings.ToLower(s[:4]) {
	case "iqn.", "eui.", "naa.":
	default:
		return fmt.Errorf("invalid iSCSI name %q: want iqn., eui. or naa.", truncate(s, 64))
	}
	for _, r := range s {
		if r <= ' ' || r > '~' {
			return fmt.Errorf("invalid iSCSI name %q: unprintable or space", truncate(s, 64))
		}
	}
	return nil
}

// scsiAddr is a SCSI device address H:C:T:L, the name of its sysfs directory.
type scsiAddr struct{ Host, Channel, Target, LUN int }

func (a scsiAddr) String() string {
	return fmt.Sprintf("%d:%d:%d:%d", a.Host, a.Channel, a.Target, a.LUN)
}

// parseSCSIAddr parses "H:C:T:L".
func parseSCSIAddr(s string) (scsiAddr, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 4 {
		return scsiAddr{}, fmt.Errorf("invalid SCSI address %q", truncate(s, 64))
	}
	var n [4]int
	for i, p := range parts {
		v, err := parseSmallUint(p)
		if err != nil {
			return scsiAddr{}, fmt.Errorf("invalid SCSI address %q", truncate(s, 64))
		}
		n[i] = v
	}
	return scsiAddr{n[0], n[1], n[2], n[3]}, nil
}

// parseHostName parses a SCSI host directory name, "host<N>".
func parseHostName(s string) (int, error) {
	rest, ok := strings.CutPrefix(s, "host")
	if !ok {
		return 0, fmt.Errorf("invalid SCSI host name %q", truncate(s, 64))
	}
	n, err := parseSmallUint(rest)
	if err != nil {
		return 0, fmt.Errorf("invalid SCSI host name %q", truncate(s, 64))
	}
	return n, nil
}

// parseSmallUint accepts only canonical decimal numbers below 2^31.
func parseSmallUint(s string) (int, error) {
	if s == "" || len(s) > 10 || (len(s) > 1 && s[0] == '0') {
		return 0, errors.New("not a canonical number")
	}
	n, err := strconv.ParseUint(s, 10, 31)
	if err != nil {
		return 0, err
	}
	return int(n), nil
}

// parseSysfsInt parses a decimal sysfs attribute such as target_id.
func parseSysfsInt(b []byte) (int, error) {
	s := strings.TrimSpace(string(b))
	n, err := strconv.ParseUint(s, 10, 31)
	if err != nil {
		return 0, fmt.Errorf("invalid number %q", truncate(s, 32))
	}
	return int(n), nil
}

// parseSectors turns a block device's sysfs "size" attribute (always in
// 512-byte sectors, whatever the logical block size) into bytes.
func parseSectors(b []byte) (int64, error) {
	s := strings.TrimSpace(string(b))
	n, err := strconv.ParseUint(s, 10, 63)
	if err != nil || n > (1<<63-1)/512 {
		return 0, fmt.Errorf("invalid sector count %q", truncate(s, 32))
	}
	return int64(n) * 512, nil
}

// parseVPDPage80 extracts the unit serial number from the raw SCSI VPD page
// 0x80 the kernel exposes as vpd_pg80: a 4-byte header (peripheral byte,
// page code 0x80, 16-bit big-endian length) followed by the serial in ASCII,
// possibly space- or NUL-padded. ONTAP's LUN serials are 12 printable chars.
func parseVPDPage80(b []byte) (string, error) {
	if len(b) < 4 {
		return "", errors.New("vpd page 0x80: short header")
	}
	if b[1] != 0x80 {
		return "", fmt.Errorf("vpd page 0x80: page code %#x", b[1])
	}
	n := int(b[2])<<8 | int(b[3])
	if len(b)-4 < n {
		return "", fmt.Errorf("vpd page 0x80: length %d exceeds %d bytes of data", n, len(b)-4)
	}
	serial := string(bytes.Trim(b[4:4+n], " \x00"))
	if serial == "" {
		return "", errors.New("vpd page 0x80: empty serial")
	}
	for _, r := range serial {
		if r < ' ' || r > '~' {
			return "", errors.New("vpd page 0x80: unprintable serial")
		}
	}
	return serial, nil
}

// blockNameRE is what a kernel block device name may look like (sdb, dm-3,
// nvme0n1, loop7); anything else read from sysfs is not used in a path.
var blockNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:+-]{0,63}$`)

func validBlockName(s string) bool { return blockNameRE.MatchString(s) }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
