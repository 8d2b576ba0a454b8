package node

import (
	"net"
	"regexp"
	"strconv"
	"strings"

	"github.com/ontap-csi/ontap-csi/node/tracking"
)

// Keys of the publish_context Trident's controller hands the node
// (docs/design/trident-compat.md §3.2).
const (
	keyProtocol          = "protocol"
	keyMountOptions      = "mountOptions"
	keyNFSServerIP       = "nfsServerIp"
	keyNFSPath           = "nfsPath"
	keyFilesystemType    = "filesystemType"
	keyUseCHAP           = "useCHAP"
	keySharedTarget      = "sharedTarget"
	keyLUNNumber         = "iscsiLunNumber"
	keyPortalCount       = "iscsiTargetPortalCount"
	keyTargetIQN         = "iscsiTargetIqn"
	keyLUNSerial         = "iscsiLunSerial"
	keyInterface         = "iscsiInterface"
	keyIgroup            = "iscsiIgroup"
	keyCHAPUser          = "iscsiUsername"
	keyCHAPInitSecret    = "iscsiInitiatorSecret"
	keyCHAPTargetUser    = "iscsiTargetUsername"
	keyCHAPTargetSecret  = "iscsiTargetSecret"
	keyEncryptedCHAPUser = "encryptedIscsiUsername"
	keyLUKS              = "LUKSEncryption"
	keySANType           = "SANType"
	keyFormatOptions     = "formatOptions"
)

// maxPortals bounds iscsiTargetPortalCount; ONTAP SVMs have a handful of
// iSCSI LIFs, Trident publishes the reporting nodes' ones.
const maxPortals = 32

var (
	iqnPattern       = regexp.MustCompile(`^(iqn\.[0-9]{4}-[0-9]{2}\.[A-Za-z0-9.:_-]+|eui\.[0-9A-Fa-f]{16}|naa\.[0-9A-Fa-f]{16,32})$`)
	hostnamePattern  = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)
	junctionPattern  = regexp.MustCompile(`^(/[A-Za-z0-9_.+@-]+)+/?$|^/$`)
	ifacePattern     = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)
	serialPattern    = regexp.MustCompile(`^[\x21-\x7e]{1,64}$`) // printable, no space
	printablePattern = regexp.MustCompile(`^[\x20-\x7e]{0,256}$`)
)

// parsePublishContext turns a publish_context into the publish info the node
// stores. Codes follow Trident's node: an unknown protocol is InvalidArgument;
// a key that is missing or does not parse is Internal (the controller wrote
// it, so the fault is not the CO's); a value that parses but could steer a
// tool somewhere else (an option, a path, an address) is InvalidArgument.
// Error messages name keys, never values of secrets.
func parsePublishContext(pc map[string]string) (*tracking.PublishInfo, error) {
	info := &tracking.PublishInfo{Localhost: true}
	if v, ok := pc[keyLUKS]; ok {
		luks, err := strconv.ParseBool(v)
		if err != nil {
			return nil, internal("publish context: %s %q is not a boolean", keyLUKS, v)
		}
		if luks {
			return nil, failedPrecondition("LUKS-encrypted volumes are not supported by ontap-csi")
		}
	}
	if v, ok := pc[keyMountOptions]; ok {
		opts, err := parseOptionList(v)
		if err != nil {
			return nil, invalidArgument("publish context %s: %v", keyMountOptions, err)
		}
		info.MountOptions = strings.Join(opts, ",")
	}
	switch p := pc[keyProtocol]; p {
	case tracking.ProtocolFile:
		return info, parseNFS(pc, info)
	case tracking.ProtocolBlock:
		return info, parseISCSI(pc, info)
	default:
		if len(p) > 32 {
			p = p[:32] + "..."
		}
		return nil, invalidArgument("unknown protocol %q in publish context", p)
	}
}

func parseNFS(pc map[string]string, info *tracking.PublishInfo) error {
	info.FilesystemType = tracking.FilesystemNFS
	server, ok := pc[keyNFSServerIP]
	if !ok || server == "" {
		return internal("publish context: %s missing", keyNFSServerIP)
	}
	if !validServer(server) {
		return invalidArgument("publish context: %s %q is neither an IP address nor a host name", keyNFSServerIP, server)
	}
	p, ok := pc[keyNFSPath]
	if !ok || p == "" {
		return internal("publish context: %s missing", keyNFSPath)
	}
	if len(p) > 1024 || !junctionPattern.MatchString(p) || strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") {
		return invalidArgument("publish context: %s %q is not an absolute junction path of [A-Za-z0-9_.+@-] names", keyNFSPath, p)
	}
	info.NfsServerIP, info.NfsPath = server, p
	return nil
}

// validServer accepts an IPv4 or IPv6 address (bare or in brackets) or a
// DNS name, which is what Trident's dataLIF may hold.
func validServer(s string) bool {
	if len(s) > 253 {
		return false
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		ip := net.ParseIP(s[1 : len(s)-1])
		return ip != nil && ip.To4() == nil
	}
	return net.ParseIP(s) != nil || hostnamePattern.MatchString(s)
}

// nfsSource is the mount source for an NFS export: server:path, with an
// IPv6 server in brackets.
func nfsSource(server, path string) string {
	if ip := net.ParseIP(server); ip != nil && ip.To4() == nil {
		server = "[" + server + "]"
	}
	return server + ":" + path
}

// validPortal accepts ip, ip:port, [ipv6] and [ipv6]:port.
func validPortal(p string) bool {
	host, port := p, ""
	if h, pt, err := net.SplitHostPort(p); err == nil {
		host, port = h, pt
	} else if strings.HasPrefix(p, "[") && strings.HasSuffix(p, "]") {
		host = p[1 : len(p)-1]
	}
	if net.ParseIP(host) == nil {
		return false
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return false
		}
	}
	return true
}

func parseISCSI(pc map[string]string, info *tracking.PublishInfo) error {
	if t, ok := pc[keySANType]; ok && t != "" && t != "iscsi" {
		return failedPrecondition("SAN type %q is not supported by ontap-csi (iSCSI only)", t)
	}
	if v, ok := pc[keyFormatOptions]; ok && strings.TrimSpace(v) != "" {
		// Free-form mkfs arguments would need their own vetting; Trident
		// only sends them when a backend sets formatOptions.
		return failedPrecondition("publish context %s is not supported by ontap-csi", keyFormatOptions)
	}
	fsType := strings.ToLower(pc[keyFilesystemType])
	switch fsType {
	case "", fsExt3, fsExt4, fsXFS, fsRaw:
	default:
		return invalidArgument("unsupported file system type %q", pc[keyFilesystemType])
	}
	info.FilesystemType = fsType

	iqn, ok := pc[keyTargetIQN]
	if !ok || iqn == "" {
		return internal("publish context: %s missing", keyTargetIQN)
	}
	if len(iqn) > 223 || !iqnPattern.MatchString(iqn) {
		return invalidArgument("publish context: %s %q is not an iSCSI name", keyTargetIQN, iqn)
	}
	info.IscsiTargetIQN = iqn

	lun, err := strconv.ParseInt(pc[keyLUNNumber], 10, 32)
	if err != nil || lun < 0 {
		return internal("publish context: %s %q is not a LUN number", keyLUNNumber, pc[keyLUNNumber])
	}
	info.IscsiLunNumber = int32(lun)

	portals, err := parsePortals(pc)
	if err != nil {
		return err
	}
	info.IscsiTargetPortal, info.IscsiPortals = portals[0], portals[1:]

	serial, ok := pc[keyLUNSerial]
	if !ok || serial == "" {
		return internal("publish context: %s missing; ontap-csi never uses a LUN it cannot identify", keyLUNSerial)
	}
	if !serialPattern.MatchString(serial) {
		return invalidArgument("publish context: %s is not 1-64 printable characters", keyLUNSerial)
	}
	info.IscsiLunSerial = serial

	info.IscsiInterface = "default"
	if v := pc[keyInterface]; v != "" {
		if !ifacePattern.MatchString(v) {
			return invalidArgument("publish context: %s %q is not an iSCSI interface name", keyInterface, v)
		}
		info.IscsiInterface = v
	}
	if v := pc[keyIgroup]; v != "" {
		if !printablePattern.MatchString(v) {
			return invalidArgument("publish context: %s is not printable", keyIgroup)
		}
		info.IscsiIgroup = v
	}
	if info.SharedTarget, err = parseBoolKey(pc, keySharedTarget); err != nil {
		return err
	}
	if info.UseCHAP, err = parseBoolKey(pc, keyUseCHAP); err != nil {
		return err
	}
	if info.UseCHAP {
		return parseCHAP(pc, info)
	}
	return nil
}

// parsePortals returns the portals p1..pN, N being the portal count.
func parsePortals(pc map[string]string) ([]string, error) {
	count, err := strconv.Atoi(pc[keyPortalCount])
	if err != nil || count < 1 {
		return nil, internal("publish context: %s %q is not a positive number", keyPortalCount, pc[keyPortalCount])
	}
	if count > maxPortals {
		return nil, invalidArgument("publish context: %d portals, more than %d", count, maxPortals)
	}
	portals := make([]string, 0, count)
	for i := 1; i <= count; i++ {
		key := "p" + strconv.Itoa(i)
		p, ok := pc[key]
		if !ok || p == "" {
			return nil, internal("publish context: portal %s missing (%s is %d)", key, keyPortalCount, count)
		}
		if !validPortal(p) {
			return nil, invalidArgument("publish context: portal %s %q is not ip[:port]", key, p)
		}
		portals = append(portals, p)
	}
	return portals, nil
}

func parseBoolKey(pc map[string]string, key string) (bool, error) {
	v, ok := pc[key]
	if !ok {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, internal("publish context: %s %q is not a boolean", key, v)
	}
	return b, nil
}

func parseCHAP(pc map[string]string, info *tracking.PublishInfo) error {
	if pc[keyCHAPUser] == "" && pc[keyEncryptedCHAPUser] != "" {
		return failedPrecondition("publish context carries encrypted CHAP credentials (Trident 21.01+ with an AES key); ontap-csi needs them in plain text")
	}
	fields := []struct {
		key      string
		dst      *string
		required bool
	}{
		{keyCHAPUser, &info.IscsiUsername, true},
		{keyCHAPInitSecret, &info.IscsiInitiatorSecret, true},
		{keyCHAPTargetUser, &info.IscsiTargetUsername, false},
		{keyCHAPTargetSecret, &info.IscsiTargetSecret, false},
	}
	for _, f := range fields {
		v := pc[f.key]
		if v == "" && f.required {
			return internal("publish context: useCHAP is set but %s is missing", f.key)
		}
		if !printablePattern.MatchString(v) {
			return invalidArgument("publish context: %s is not printable ASCII of at most 256 characters", f.key)
		}
		*f.dst = v
	}
	if (info.IscsiTargetUsername == "") != (info.IscsiTargetSecret == "") {
		return internal("publish context: %s and %s must be set together", keyCHAPTargetUser, keyCHAPTargetSecret)
	}
	return nil
}
