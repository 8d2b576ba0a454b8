package main

import (
	"errors"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The options of an NFS mount, as mount.nfs and the kernel's NFS client
// take them (nfs(5)): an option either of them does not know fails the
// mount ("an incorrect mount option was specified", exit 32), and the
// generic ones (nosuid, nodev, noexec, noatime, ro) show on the mount.

// errBadOption is mount.nfs's wording for an option the kernel refuses.
var errBadOption = errors.New("an incorrect mount option was specified")

// vfsFlags are the generic options a bind mount can carry too.
var vfsFlags = map[string]uintptr{
	"ro": unix.MS_RDONLY, "nosuid": unix.MS_NOSUID, "nodev": unix.MS_NODEV, "noexec": unix.MS_NOEXEC,
	"noatime": unix.MS_NOATIME, "nodiratime": unix.MS_NODIRATIME, "relatime": unix.MS_RELATIME,
	"strictatime": unix.MS_STRICTATIME, "sync": unix.MS_SYNCHRONOUS,
}

// noEffect are options with nothing to do for a bind mount: their
// opposites of the flags above and mount(8)'s own.
var noEffect = map[string]bool{
	"rw": true, "suid": true, "dev": true, "exec": true, "atime": true, "diratime": true, "async": true,
	"defaults": true, "auto": true, "noauto": true, "user": true, "nouser": true, "_netdev": true, "nofail": true,
}

// nfsFlags are nfs(5)'s options without a value.
var nfsFlags = map[string]bool{
	"hard": true, "soft": true, "softreval": true, "nosoftreval": true, "intr": true, "nointr": true,
	"cto": true, "nocto": true, "ac": true, "noac": true, "lock": true, "nolock": true, "acl": true, "noacl": true,
	"rdirplus": true, "nordirplus": true, "sharecache": true, "nosharecache": true, "resvport": true,
	"noresvport": true, "fsc": true, "nofsc": true, "posix": true, "noposix": true, "tcp": true, "udp": true,
	"rdma": true, "bg": true, "fg": true, "migration": true, "nomigration": true, "trunkdiscovery": true,
	"notrunkdiscovery": true,
}

// nfsValues are nfs(5)'s options with a value, and what the value may be.
var nfsValues = map[string]func(string) bool{
	"vers":    oneOf("2", "3", "4", "4.0", "4.1", "4.2"),
	"nfsvers": oneOf("2", "3", "4", "4.0", "4.1", "4.2"), "minorversion": oneOf("0", "1", "2"),
	"proto": oneOf("tcp", "udp", "rdma", "tcp6", "udp6", "rdma6"), "mountproto": oneOf("tcp", "udp", "tcp6", "udp6"),
	"sec": oneOf("sys", "none", "krb5", "krb5i", "krb5p"), "lookupcache": oneOf("all", "none", "pos", "positive"),
	"local_lock": oneOf("all", "flock", "posix", "none"), "xprtsec": oneOf("none", "tls", "mtls"),
	"port": number, "mountport": number, "mountvers": number, "nfsprog": number, "mountprog": number,
	"timeo": number, "retrans": number, "rsize": number, "wsize": number, "bsize": number, "retry": number,
	"acregmin": number, "acregmax": number, "acdirmin": number, "acdirmax": number, "actimeo": number,
	"nconnect": number, "max_connect": number, "namlen": number,
	"clientaddr": nonEmpty, "mounthost": nonEmpty, "addr": nonEmpty, "mountaddr": nonEmpty,
	"fsc": nonEmpty, "context": nonEmpty, "fscontext": nonEmpty, "rootcontext": nonEmpty, "defcontext": nonEmpty,
}

func oneOf(vs ...string) func(string) bool {
	return func(v string) bool {
		for _, x := range vs {
			if v == x {
				return true
			}
		}
		return false
	}
}

func number(v string) bool   { _, err := strconv.ParseUint(v, 10, 32); return err == nil }
func nonEmpty(v string) bool { return v != "" }

// mountFlags checks the options of an NFS mount and returns the generic
// flags the mount gets.
func mountFlags(opts []string) (uintptr, error) {
	var flags uintptr
	for _, o := range opts {
		name, value, hasValue := strings.Cut(o, "=")
		switch {
		case !hasValue && vfsFlags[name] != 0:
			flags |= vfsFlags[name]
		case !hasValue && name == "rw":
			flags &^= unix.MS_RDONLY
		case !hasValue && (noEffect[name] || nfsFlags[name]):
		case hasValue && nfsValues[name] != nil && nfsValues[name](value):
		default:
			return 0, errBadOption
		}
	}
	return flags, nil
}
