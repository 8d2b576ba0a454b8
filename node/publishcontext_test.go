package node

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ontap-csi/ontap-csi/node/tracking"
)

var (
	nfsContext = map[string]string{
		"protocol": "file", "nfsServerIp": "10.193.108.20", "nfsPath": "/trident_pvc_1", "mountOptions": "-o nfsvers=4.1,hard",
	}
	iscsiContext = map[string]string{
		"protocol": "block", "filesystemType": "ext4", "iscsiTargetIqn": "iqn.1992-08.com.netapp:sn.f9b1e7c2:vs.4",
		"iscsiLunNumber": "3", "iscsiTargetPortalCount": "2", "p1": "10.193.108.21", "p2": "10.193.108.22:3260",
		"iscsiLunSerial": "80D4s+H0Ma0E", "iscsiInterface": "default", "iscsiIgroup": "trident-igroup",
		"sharedTarget": "false", "useCHAP": "true", "iscsiUsername": "user", "iscsiInitiatorSecret": "s3cret-initiator",
		"iscsiTargetUsername": "tuser", "iscsiTargetSecret": "s3cret-target",
	}
)

func with(base map[string]string, kv ...string) map[string]string {
	m := maps.Clone(base)
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "<delete>" {
			delete(m, kv[i])
		} else {
			m[kv[i]] = kv[i+1]
		}
	}
	return m
}

func TestParsePublishContext(t *testing.T) {
	tests := []struct {
		name string
		pc   map[string]string
		code codes.Code // OK = parses
	}{
		{"nfs", nfsContext, codes.OK},
		{"nfs ipv6", with(nfsContext, "nfsServerIp", "fd20:8b1e:b258:2000::20"), codes.OK},
		{"nfs hostname", with(nfsContext, "nfsServerIp", "nfs.svm1.example.com"), codes.OK},
		{"iscsi", iscsiContext, codes.OK},
		{"iscsi without chap", with(iscsiContext, "useCHAP", "false", "iscsiUsername", "<delete>"), codes.OK},
		{"iscsi one portal", with(iscsiContext, "iscsiTargetPortalCount", "1", "p2", "<delete>"), codes.OK},
		{"iscsi ipv6 portal", with(iscsiContext, "p2", "[fd20::21]:3260"), codes.OK},

		// Trident's codes (docs/design/trident-compat.md §3.2): unknown protocol is InvalidArgument...
		{"no protocol", with(nfsContext, "protocol", "<delete>"), codes.InvalidArgument},
		{"unknown protocol", with(nfsContext, "protocol", "smb"), codes.InvalidArgument},
		{"empty context", map[string]string{}, codes.InvalidArgument},
		// ...a missing or unparsable key Internal...
		{"no nfs server", with(nfsContext, "nfsServerIp", "<delete>"), codes.Internal},
		{"no nfs path", with(nfsContext, "nfsPath", ""), codes.Internal},
		{"bad useCHAP", with(iscsiContext, "useCHAP", "maybe"), codes.Internal},
		{"bad sharedTarget", with(iscsiContext, "sharedTarget", "2"), codes.Internal},
		{"bad lun", with(iscsiContext, "iscsiLunNumber", "three"), codes.Internal},
		{"negative lun", with(iscsiContext, "iscsiLunNumber", "-1"), codes.Internal},
		{"no lun", with(iscsiContext, "iscsiLunNumber", "<delete>"), codes.Internal},
		{"zero portals", with(iscsiContext, "iscsiTargetPortalCount", "0"), codes.Internal},
		{"bad portal count", with(iscsiContext, "iscsiTargetPortalCount", "x"), codes.Internal},
		{"missing p2", with(iscsiContext, "p2", "<delete>"), codes.Internal},
		{"no iqn", with(iscsiContext, "iscsiTargetIqn", "<delete>"), codes.Internal},
		{"no serial", with(iscsiContext, "iscsiLunSerial", "<delete>"), codes.Internal},
		{"chap without secret", with(iscsiContext, "iscsiInitiatorSecret", "<delete>"), codes.Internal},
		{"half mutual chap", with(iscsiContext, "iscsiTargetSecret", "<delete>"), codes.Internal},
		// ...and a value that would steer a tool elsewhere InvalidArgument.
		{"option smuggles a bind", with(nfsContext, "mountOptions", "nfsvers=4,bind"), codes.InvalidArgument},
		{"option smuggles a second source", with(nfsContext, "mountOptions", "-o nfsvers=4 10.0.0.9:/other"), codes.InvalidArgument},
		{"option addr redirects the server", with(nfsContext, "mountOptions", "addr=10.6.6.6"), codes.InvalidArgument},
		{"option newline", with(nfsContext, "mountOptions", "hard\nbind"), codes.InvalidArgument},
		{"server with a path", with(nfsContext, "nfsServerIp", "10.0.0.1:/etc"), codes.InvalidArgument},
		{"server with an option", with(nfsContext, "nfsServerIp", "-oremount"), codes.InvalidArgument},
		{"relative nfs path", with(nfsContext, "nfsPath", "trident_pvc_1"), codes.InvalidArgument},
		{"nfs path traversal", with(nfsContext, "nfsPath", "/vol/../../etc"), codes.InvalidArgument},
		{"nfs path with comma", with(nfsContext, "nfsPath", "/a,bind"), codes.InvalidArgument},
		{"nfs path with space", with(nfsContext, "nfsPath", "/a /b"), codes.InvalidArgument},
		{"iqn with a space", with(iscsiContext, "iscsiTargetIqn", "iqn.1992-08.com.netapp:x -o y"), codes.InvalidArgument},
		{"iqn not an iqn", with(iscsiContext, "iscsiTargetIqn", "--op=delete"), codes.InvalidArgument},
		{"portal not an address", with(iscsiContext, "p1", "evil.example.com;reboot"), codes.InvalidArgument},
		{"portal bad port", with(iscsiContext, "p1", "10.0.0.1:99999"), codes.InvalidArgument},
		{"too many portals", with(iscsiContext, "iscsiTargetPortalCount", "1000"), codes.InvalidArgument},
		{"serial with newline", with(iscsiContext, "iscsiLunSerial", "abc\ndef"), codes.InvalidArgument},
		{"interface with slash", with(iscsiContext, "iscsiInterface", "../iface"), codes.InvalidArgument},
		{"chap secret with newline", with(iscsiContext, "iscsiInitiatorSecret", "a\nnode.startup=automatic"), codes.InvalidArgument},
		{"unsupported fs", with(iscsiContext, "filesystemType", "btrfs"), codes.InvalidArgument},
		// Features Trident has and ontap-csi does not.
		{"luks", with(iscsiContext, "LUKSEncryption", "true"), codes.FailedPrecondition},
		{"nvme", with(iscsiContext, "SANType", "nvme"), codes.FailedPrecondition},
		{"format options", with(iscsiContext, "formatOptions", "-E lazy_itable_init=1"), codes.FailedPrecondition},
		{"encrypted chap", with(iscsiContext, "iscsiUsername", "<delete>", "encryptedIscsiUsername", "AAAA"), codes.FailedPrecondition},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			info, err := parsePublishContext(tc.pc)
			if got := status.Code(toStatus(err)); got != tc.code {
				t.Fatalf("code %v (%v), want %v", got, err, tc.code)
			}
			if err != nil {
				for _, secret := range []string{"s3cret-initiator", "s3cret-target"} {
					if strings.Contains(err.Error(), secret) {
						t.Fatalf("error quotes a secret: %v", err)
					}
				}
				return
			}
			if info.Protocol() != tc.pc["protocol"] {
				t.Fatalf("protocol %q", info.Protocol())
			}
		})
	}
}

func TestParsePublishContextFields(t *testing.T) {
	info, err := parsePublishContext(iscsiContext)
	if err != nil {
		t.Fatal(err)
	}
	want := tracking.PublishInfo{
		Localhost: true, FilesystemType: "ext4", IscsiTargetIQN: iscsiContext["iscsiTargetIqn"], IscsiLunNumber: 3,
		IscsiTargetPortal: "10.193.108.21", IscsiPortals: []string{"10.193.108.22:3260"}, IscsiLunSerial: "80D4s+H0Ma0E",
		IscsiInterface: "default", IscsiIgroup: "trident-igroup", UseCHAP: true, IscsiUsername: "user",
		IscsiInitiatorSecret: "s3cret-initiator", IscsiTargetUsername: "tuser", IscsiTargetSecret: "s3cret-target",
	}
	if info.IscsiTargetIQN != want.IscsiTargetIQN || info.IscsiLunNumber != want.IscsiLunNumber || info.IscsiTargetPortal != want.IscsiTargetPortal ||
		strings.Join(info.IscsiPortals, ",") != "10.193.108.22:3260" || info.IscsiLunSerial != want.IscsiLunSerial ||
		!info.UseCHAP || info.IscsiInitiatorSecret != want.IscsiInitiatorSecret || info.IscsiTargetSecret != want.IscsiTargetSecret ||
		info.IscsiIgroup != want.IscsiIgroup || info.FilesystemType != "ext4" {
		t.Fatalf("parsed %+v", info)
	}
	nfs, err := parsePublishContext(nfsContext)
	if err != nil {
		t.Fatal(err)
	}
	if nfs.MountOptions != "nfsvers=4.1,hard" || nfs.FilesystemType != "nfs" || nfsSource(nfs.NfsServerIP, nfs.NfsPath) != "10.193.108.20:/trident_pvc_1" {
		t.Fatalf("parsed %+v", nfs)
	}
	if got := nfsSource("fd20::20", "/v"); got != "[fd20::20]:/v" {
		t.Fatalf("IPv6 source %q", got)
	}
}

// FuzzParsePublishContext: whatever the publish context holds, parsing does
// not panic, and what it accepts cannot steer mount or iscsiadm: every
// option stands alone, the NFS source is one server and one absolute path,
// the portals are addresses.
func FuzzParsePublishContext(f *testing.F) {
	f.Add("file", "10.0.0.1", "/vol", "-o nfsvers=4", "", "", "", "", "")
	f.Add("block", "", "", "", "iqn.1992-08.com.netapp:sn.1:vs.2", "0", "1", "10.0.0.2", "serial1")
	f.Fuzz(func(t *testing.T, protocol, server, path, opts, iqn, lun, count, p1, serial string) {
		pc := map[string]string{
			"protocol": protocol, "nfsServerIp": server, "nfsPath": path, "mountOptions": opts,
			"iscsiTargetIqn": iqn, "iscsiLunNumber": lun, "iscsiTargetPortalCount": count, "p1": p1, "iscsiLunSerial": serial,
		}
		checkParsed(t, pc)
	})
}

// FuzzParsePublishContextKeys fuzzes whole publish contexts, every key
// Trident sends included (CHAP, p1..pN, the booleans), one "key=value"
// per line.
func FuzzParsePublishContextKeys(f *testing.F) {
	for _, pc := range []map[string]string{
		iscsiContext,
		with(iscsiContext, "useCHAP", "true", "iscsiUsername", "in", "iscsiInitiatorSecret", "secret-in-1234",
			"iscsiTargetUsername", "out", "iscsiTargetSecret", "secret-out-1234"),
		with(iscsiContext, "iscsiTargetPortalCount", "3", "p3", "[fd00::3]:3260", "sharedTarget", "false", "filesystemType", "xfs"),
		with(iscsiContext, "iscsiTargetPortalCount", "9999999999", "useCHAP", "maybe"),
		{"protocol": "file", "nfsServerIp": "10.0.0.1", "nfsPath": "/trident_pvc_1", "mountOptions": "nfsvers=4.1,hard"},
	} {
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(pc)) {
			b.WriteString(k + "=" + pc[k] + "\n")
		}
		f.Add(b.String())
	}
	f.Fuzz(func(t *testing.T, lines string) {
		pc := map[string]string{}
		for _, line := range strings.Split(lines, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				pc[k] = v
			}
		}
		checkParsed(t, pc)
	})
}

// checkParsed parses pc and checks what the node may act on: an error
// carries a gRPC code; an accepted context holds only safe options, NFS
// sources and portals.
func checkParsed(t *testing.T, pc map[string]string) {
	t.Helper()
	protocol := pc["protocol"]
	info, err := parsePublishContext(pc)
	if err != nil {
		if status.Code(toStatus(err)) == codes.OK {
			t.Fatal("error without a code")
		}
		return
	}
	if info.MountOptions != "" {
		for _, o := range strings.Split(info.MountOptions, ",") {
			if err := checkOption(o); err != nil {
				t.Fatalf("accepted option %q: %v", o, err)
			}
		}
	}
	switch info.Protocol() {
	case tracking.ProtocolFile:
		src := nfsSource(info.NfsServerIP, info.NfsPath)
		if strings.ContainsAny(src, ", \t\n\x00") || !strings.HasPrefix(info.NfsPath, "/") || strings.Contains(info.NfsPath, "/../") {
			t.Fatalf("accepted NFS source %q", src)
		}
	case tracking.ProtocolBlock:
		for _, p := range info.Portals() {
			if !validPortal(p) || strings.HasPrefix(p, "-") {
				t.Fatalf("accepted portal %q", p)
			}
		}
		if strings.HasPrefix(info.IscsiTargetIQN, "-") || strings.ContainsAny(info.IscsiTargetIQN, " \n\x00") {
			t.Fatalf("accepted IQN %q", info.IscsiTargetIQN)
		}
		// CHAP: the initiator's pair is complete, the target's is whole or absent.
		if info.UseCHAP && (info.IscsiUsername == "" || info.IscsiInitiatorSecret == "" ||
			(info.IscsiTargetUsername == "") != (info.IscsiTargetSecret == "")) {
			t.Fatalf("accepted incomplete CHAP credentials from %v", pc)
		}
	default:
		t.Fatalf("accepted protocol %q", protocol)
	}
}
