package shim

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
)

// iscsiadm exit codes (open-iscsi include/iscsi_err.h).
const (
	exitGeneric     = 1
	exitNotFound    = 3
	exitInval       = 7
	exitTransTimeo  = 8
	exitSessExists  = 15
	exitFatalLogin  = 19
	exitNoObjsFound = 21
	exitAuthFailed  = 24
)

type admArgs struct {
	mode, target, portal, iface, op, name, value, sid, print string
	login, logout, version                                   bool
	ifaceSet                                                 bool
}

// exitError is an iscsiadm failure: message on stderr, status code.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func fail(code int, format string, args ...any) error {
	return &exitError{code: code, msg: "iscsiadm: " + fmt.Sprintf(format, args...)}
}

func parseAdmArgs(args []string) (*admArgs, error) {
	a := &admArgs{iface: "default"}
	withValue := map[string]*string{
		"-m": &a.mode, "--mode": &a.mode, "-T": &a.target, "--targetname": &a.target,
		"-p": &a.portal, "--portal": &a.portal, "-I": &a.iface, "--interface": &a.iface,
		"-o": &a.op, "--op": &a.op, "-n": &a.name, "--name": &a.name, "-v": &a.value, "--value": &a.value,
		"-r": &a.sid, "--sid": &a.sid, "-P": &a.print, "--print": &a.print,
	}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if k, v, ok := strings.Cut(arg, "="); ok && strings.HasPrefix(k, "--") {
			if p := withValue[k]; p != nil {
				*p = v
				a.ifaceSet = a.ifaceSet || k == "--interface"
				continue
			}
		}
		if p := withValue[arg]; p != nil {
			if i+1 >= len(args) {
				return nil, fail(exitInval, "option %s needs a value", arg)
			}
			i++
			*p = args[i]
			a.ifaceSet = a.ifaceSet || arg == "-I" || arg == "--interface"
			continue
		}
		switch arg {
		case "-l", "--login":
			a.login = true
		case "-u", "--logout":
			a.logout = true
		case "-V", "--version":
			a.version = true
		default:
			return nil, fail(exitInval, "unrecognized option %q (ontap-csi test shim)", arg)
		}
	}
	if a.portal != "" {
		p, err := normalizePortal(a.portal)
		if err != nil {
			return nil, fail(exitInval, "%v", err)
		}
		a.portal = p
	}
	return a, nil
}

// normalizePortal gives a portal its default port, as iscsiadm does.
func normalizePortal(p string) (string, error) {
	if _, _, err := net.SplitHostPort(p); err == nil {
		return p, nil
	}
	host := strings.Trim(p, "[]")
	if host == "" {
		return "", fmt.Errorf("invalid portal %q", p)
	}
	return net.JoinHostPort(host, "3260"), nil
}

// iscsiadmMain emulates the iscsiadm invocations a node plugin makes.
func (e *Env) iscsiadmMain(args []string, stdout, stderr io.Writer) int {
	a, err := parseAdmArgs(args)
	if err == nil {
		err = e.iscsiadm(a, stdout)
	}
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		fmt.Fprintln(stderr, ee.msg)
		return ee.code
	default:
		fmt.Fprintln(stderr, "iscsiadm:", err)
		return exitGeneric
	}
}

func (e *Env) iscsiadm(a *admArgs, out io.Writer) error {
	if a.version {
		fmt.Fprintln(out, "iscsiadm version 2.1.8 (ontap-csi test shim)")
		return nil
	}
	switch a.mode {
	case "session":
		if a.sid != "" && a.logout {
			sid, err := strconv.Atoi(a.sid)
			if err != nil {
				return fail(exitInval, "invalid sid %q", a.sid)
			}
			return e.update(func(st *State) error {
				s := st.session(sid)
				if s == nil {
					return fail(exitNoObjsFound, "No session found.")
				}
				return e.logoutSession(st, s, out)
			})
		}
		if a.print != "" && a.print != "0" {
			return fail(exitInval, "print level %s is not supported by the test shim", a.print)
		}
		st, err := loadState(e.State)
		if err != nil {
			return err
		}
		if len(st.Sessions) == 0 {
			return fail(exitNoObjsFound, "No active sessions.")
		}
		for _, s := range st.Sessions {
			fmt.Fprintf(out, "tcp: [%d] %s,1 %s (non-flash)\n", s.SID, s.Portal, s.Target)
		}
		return nil
	case "node":
		return e.update(func(st *State) error { return e.nodeMode(st, a, out) })
	case "discovery", "discoverydb":
		return fail(exitInval, "discovery is not emulated by the test shim; the node uses the publish context's portals")
	}
	return fail(exitInval, "mode %q is not supported by the test shim", a.mode)
}

func (e *Env) nodeMode(st *State, a *admArgs, out io.Writer) error {
	// open-iscsi 2.1 knows the built-in interfaces and those in
	// /etc/iscsi/ifaces, of which the shim has none.
	if a.ifaceSet && a.iface != "default" && a.iface != "iser" {
		return fail(exitNotFound, "Could not read iface info for %s.", a.iface)
	}
	var recs []*NodeRecord
	for _, r := range st.Nodes {
		if a.matches(r.Target, r.Portal, r.Iface) {
			recs = append(recs, r)
		}
	}
	switch {
	case a.op == "new":
		return newNodeRecord(st, a, out)
	case a.op == "update":
		return updateNodeRecords(a, recs)
	case a.op == "delete":
		if len(recs) == 0 {
			return fail(exitNoObjsFound, "No records found")
		}
		kept := st.Nodes[:0]
		for _, r := range st.Nodes {
			if !a.matches(r.Target, r.Portal, r.Iface) {
				kept = append(kept, r)
			}
		}
		st.Nodes = kept
		return nil
	case a.op != "":
		return fail(exitInval, "op %q is not supported by the test shim", a.op)
	case a.login:
		if len(recs) == 0 {
			return fail(exitNoObjsFound, "No records found")
		}
		var first error
		for _, r := range recs {
			if err := e.login(st, r, out); err != nil && first == nil {
				first = err
			}
		}
		return first
	case a.logout:
		return e.logoutMatching(st, a, out)
	}
	return listNodeRecords(recs, out)
}

// matches reports whether a node record or session is one -T, -p and -I
// select.
func (a *admArgs) matches(target, portal, iface string) bool {
	return (a.target == "" || strings.EqualFold(a.target, target)) &&
		(a.portal == "" || a.portal == portal) &&
		(!a.ifaceSet || a.iface == iface)
}

// newNodeRecord is -o new: like iscsiadm, a new record replaces an existing
// one with iscsid.conf defaults (scan automatic, no auth).
func newNodeRecord(st *State, a *admArgs, out io.Writer) error {
	if a.target == "" || a.portal == "" {
		return fail(exitInval, "--op new needs -T and -p")
	}
	rec := &NodeRecord{Target: a.target, Portal: a.portal, Iface: a.iface, Settings: map[string]string{
		"node.startup": "automatic", "node.session.scan": "auto", "node.session.auth.authmethod": "None",
	}}
	kept := st.Nodes[:0]
	for _, r := range st.Nodes {
		if !(strings.EqualFold(r.Target, a.target) && r.Portal == a.portal && r.Iface == a.iface) {
			kept = append(kept, r)
		}
	}
	st.Nodes = append(kept, rec)
	fmt.Fprintf(out, "New iSCSI node [tcp:[hw=,ip=,net_if=,iscsi_if=%s] %s,-1 %s] added\n", a.iface, displayPortal(a.portal), a.target)
	return nil
}

// updateNodeRecords is -o update: open-iscsi 2.1 refuses a setting a node
// record does not have (docs/design/architecture.md §7.6).
func updateNodeRecords(a *admArgs, recs []*NodeRecord) error {
	if a.name == "" {
		return fail(exitInval, "--op update needs -n")
	}
	if len(recs) == 0 {
		return fail(exitNoObjsFound, "No records found")
	}
	if !knownNodeSetting(a.name) {
		return &exitError{code: exitInval, msg: "iscsiadm: Cannot modify " + a.name + ". Invalid param name.\n" +
			"iscsiadm: Could not execute operation on all records: invalid parameter"}
	}
	for _, r := range recs {
		r.Settings[a.name] = a.value
	}
	return nil
}

// logoutMatching is --logout: every session -T, -p and -I select.
func (e *Env) logoutMatching(st *State, a *admArgs, out io.Writer) error {
	var n int
	for _, s := range append([]*Session(nil), st.Sessions...) {
		if a.matches(s.Target, s.Portal, s.Iface) {
			n++
			if err := e.logoutSession(st, s, out); err != nil {
				return err
			}
		}
	}
	if n == 0 {
		return fail(exitNoObjsFound, "No matching sessions found")
	}
	return nil
}

// listNodeRecords is a bare -m node: one line per record.
func listNodeRecords(recs []*NodeRecord, out io.Writer) error {
	if len(recs) == 0 {
		return fail(exitNoObjsFound, "No records found")
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Portal < recs[j].Portal })
	for _, r := range recs {
		// Static records (-o new) have no portal group: open-iscsi 2.1
		// prints it as an unsigned -1 (a real kernel showed it).
		fmt.Fprintf(out, "%s,4294967295 %s\n", r.Portal, r.Target)
	}
	return nil
}

func (e *Env) login(st *State, r *NodeRecord, out io.Writer) error {
	where := fmt.Sprintf("[iface: %s, target: %s, portal: %s]", r.Iface, r.Target, displayPortal(r.Portal))
	for _, s := range st.Sessions {
		if strings.EqualFold(s.Target, r.Target) && s.Portal == r.Portal && s.Iface == r.Iface {
			return fail(exitSessExists, "%s: 1 session requested, but 1 already present.", r.Iface)
		}
	}
	initiator, err := readInitiatorName(e.InitiatorFile)
	if err != nil {
		return fail(exitGeneric, "%v", err)
	}
	sim, err := e.sim()
	if err != nil {
		return err
	}
	req := loginRequest{Initiator: initiator, Portal: r.Portal, Target: r.Target}
	if strings.EqualFold(r.Settings["node.session.auth.authmethod"], "CHAP") {
		req.CHAP = &simCHAP{
			Username: r.Settings["node.session.auth.username"], Secret: r.Settings["node.session.auth.password"],
			TargetUsername: r.Settings["node.session.auth.username_in"], TargetSecret: r.Settings["node.session.auth.password_in"],
		}
	}
	fmt.Fprintf(out, "Logging in to %s\n", where)
	resp, err := sim.login(req)
	var se *simError
	switch {
	case errors.As(err, &se) && se.Status == 401:
		return fail(exitAuthFailed, "Could not login to %s.\niscsiadm: initiator reported error (24 - iSCSI login failed due to authorization failure)", where)
	case errors.As(err, &se) && se.Status == 404:
		return fail(exitFatalLogin, "Could not login to %s.\niscsiadm: initiator reported error (19 - encountered non-retryable iSCSI login failure)", where)
	case err != nil:
		return fail(exitTransTimeo, "Could not login to %s.\niscsiadm: initiator reported error (8 - connection timed out): %v", where, err)
	}
	s := &Session{SID: st.NextSID, Host: st.NextHost, Target: resp.Target, Portal: r.Portal, Iface: r.Iface, Initiator: initiator}
	st.NextSID++
	st.NextHost++
	st.Sessions = append(st.Sessions, s)
	if err := e.createSessionSysfs(s); err != nil {
		return err
	}
	if r.Settings["node.session.scan"] != "manual" {
		// The kernel scans the whole session at login unless told not to.
		for _, l := range resp.LUNs {
			if err := e.addDevice(st, s, l); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(out, "Login to %s successful.\n", where)
	return nil
}

// logoutSession tears a session down; the kernel removes its SCSI devices
// with it, in use or not.
func (e *Env) logoutSession(st *State, s *Session, out io.Writer) error {
	for _, d := range append([]*Device(nil), s.Devices...) {
		if err := e.removeDevice(st, s, d); err != nil {
			return err
		}
	}
	if err := e.removeSessionSysfs(s); err != nil {
		return err
	}
	for i, x := range st.Sessions {
		if x == s {
			st.Sessions = append(st.Sessions[:i], st.Sessions[i+1:]...)
			break
		}
	}
	fmt.Fprintf(out, "Logout of [sid: %d, target: %s, portal: %s] successful.\n", s.SID, s.Target, displayPortal(s.Portal))
	return nil
}

// displayPortal prints "ip:port" the way iscsiadm messages do, "ip,port".
func displayPortal(p string) string {
	if i := strings.LastIndex(p, ":"); i > 0 {
		return p[:i] + "," + p[i+1:]
	}
	return p
}

func readInitiatorName(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "InitiatorName="); ok && !strings.HasPrefix(line, "#") {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%s: no InitiatorName", path)
}

// nodeSettings are the node record settings open-iscsi 2.1 lets
// "-o update" change (idbm_node_setup_from_rec); anything else is "Invalid
// param name" (exit 7) there. node.conn[N] settings go by the prefix.
var nodeSettings = map[string]bool{
	"node.name": true, "node.tpgt": true, "node.startup": true, "node.leading_login": true,
	"node.discovery_address": true, "node.discovery_port": true, "node.discovery_type": true,
	"node.session.initial_cmdsn": true, "node.session.initial_login_retry_max": true,
	"node.session.xmit_thread_priority": true, "node.session.cmds_max": true, "node.session.queue_depth": true,
	"node.session.nr_sessions": true, "node.session.scan": true, "node.session.reopen_max": true,
	"node.session.auth.authmethod": true, "node.session.auth.username": true, "node.session.auth.password": true,
	"node.session.auth.username_in": true, "node.session.auth.password_in": true, "node.session.auth.chap_algs": true,
	"node.session.timeo.replacement_timeout": true, "node.session.err_timeo.abort_timeout": true,
	"node.session.err_timeo.lu_reset_timeout": true, "node.session.err_timeo.tgt_reset_timeout": true,
	"node.session.err_timeo.host_reset_timeout": true, "node.session.iscsi.FastAbort": true,
	"node.session.iscsi.InitialR2T": true, "node.session.iscsi.ImmediateData": true,
	"node.session.iscsi.FirstBurstLength": true, "node.session.iscsi.MaxBurstLength": true,
	"node.session.iscsi.DefaultTime2Retain": true, "node.session.iscsi.DefaultTime2Wait": true,
	"node.session.iscsi.MaxConnections": true, "node.session.iscsi.MaxOutstandingR2T": true,
	"node.session.iscsi.ERL": true,
}

// connSettings are the node.conn[N].<setting> names.
var connSettings = map[string]bool{
	"address": true, "port": true, "startup": true, "tcp.window_size": true, "tcp.type_of_service": true,
	"timeo.logout_timeout": true, "timeo.login_timeout": true, "timeo.auth_timeout": true,
	"timeo.noop_out_interval": true, "timeo.noop_out_timeout": true,
	"iscsi.MaxXmitDataSegmentLength": true, "iscsi.MaxRecvDataSegmentLength": true,
	"iscsi.HeaderDigest": true, "iscsi.DataDigest": true, "iscsi.IFMarker": true, "iscsi.OFMarker": true,
}

func knownNodeSetting(name string) bool {
	if nodeSettings[name] {
		return true
	}
	rest, ok := strings.CutPrefix(name, "node.conn[")
	if !ok {
		return false
	}
	n, setting, ok := strings.Cut(rest, "].")
	if _, err := strconv.Atoi(n); err != nil || !ok {
		return false
	}
	return connSettings[setting]
}
