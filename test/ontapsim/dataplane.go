package ontapsim

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"sort"
	"strings"
)

// The /sim/... endpoints are test infrastructure, not ONTAP: no auth, no
// latency, no faults. The NFS and iSCSI shims of test/ call them instead of
// a kernel client; see the package documentation for the contract.

func (s *Simulator) serveSim(w http.ResponseWriter, r *http.Request) {
	switch p := strings.TrimSuffix(r.URL.Path, "/"); {
	case p == "/sim/nfs/export" && r.Method == http.MethodGet:
		s.simNFSExport(w, r)
	case p == "/sim/iscsi/login" && r.Method == http.MethodPost:
		s.simISCSILogin(w, r)
	case p == "/sim/iscsi/luns" && r.Method == http.MethodGet:
		s.simISCSILUNs(w, r)
	case p == "/sim/stats" && r.Method == http.MethodGet:
		simJSON(w, http.StatusOK, statsJSON(s.Stats()))
	case p == "/sim/stats/reset" && r.Method == http.MethodPost:
		s.ResetStats()
		simJSON(w, http.StatusOK, map[string]any{})
	case p == "/sim/faults" && r.Method == http.MethodGet:
		simJSON(w, http.StatusOK, map[string]any{"spec": faultSpec(s.Faults())})
	case p == "/sim/faults" && r.Method == http.MethodPut:
		s.simSetFaults(w, r)
	case p == "/sim/dataplane" && (r.Method == http.MethodGet || r.Method == http.MethodPut):
		s.simDataPlane(w, r)
	case p == "/sim/tls/ca.pem" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/x-pem-file")
		w.Write(s.CACertificatePEM())
	case p == "/sim/info" && r.Method == http.MethodGet:
		simJSON(w, http.StatusOK, s.Info())
	default:
		simError(w, http.StatusNotFound, "no such simulator endpoint: %s %s", r.Method, r.URL.Path)
	}
}

func simJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

func simError(w http.ResponseWriter, status int, format string, args ...any) {
	simJSON(w, status, map[string]any{"error": fmt.Sprintf(format, args...)})
}

// NFSExport is the answer of GET /sim/nfs/export.
type NFSExport struct {
	Volume    string `json:"volume"`
	Directory string `json:"directory"`
	Access    string `json:"access"` // "rw" or "ro"
}

// planeError is a refused data-plane request and its HTTP status.
type planeError struct {
	status int
	msg    string
}

func (e *planeError) Error() string { return e.msg }

// ResolveNFSExport answers "which directory does NFS client `client` get
// when it mounts `server`:`p`": 404 when server is not an up NFS data LIF
// of the SVM or no online volume is mounted there, 403 when an export
// policy on the way refuses the client. Every volume crossed on the way
// from "/" must allow the client read access, as on ONTAP.
func (s *Simulator) ResolveNFSExport(server, client, p string) (*NFSExport, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ip := net.ParseIP(client)
	if ip == nil {
		return nil, &planeError{http.StatusBadRequest, fmt.Sprintf("client %q is not an IP address", client)}
	}
	if p == "" || !strings.HasPrefix(p, "/") {
		return nil, &planeError{http.StatusBadRequest, fmt.Sprintf("path %q must be absolute", p)}
	}
	m := s.m
	svm := m.dataSVM()
	if !svm.NFS || m.lifByIP(svm.UUID, server, "data_nfs") == nil {
		return nil, &planeError{http.StatusNotFound, fmt.Sprintf("%s is not an NFS data LIF of SVM %s", server, svm.Name)}
	}
	p = path.Clean(p)
	vol, rel := m.resolvePath(svm.UUID, p)
	if vol == nil {
		return nil, &planeError{http.StatusNotFound, fmt.Sprintf("no online volume is mounted at %s", p)}
	}
	dir, ok := confine(s.volumeDir(vol.UUID), rel)
	if fi, err := statDir(dir); !ok || err != nil || !fi {
		return nil, &planeError{http.StatusNotFound, fmt.Sprintf("%s: no such directory in volume %s", p, vol.Name)}
	}
	access := ""
	for v := vol; v != nil; {
		pol := m.ExportPolicies[v.ExportPolicy]
		var ro, rw bool
		if pol != nil {
			ro, rw = policyAccess(pol, ip)
		}
		if v == vol {
			switch {
			case rw:
				access = "rw"
			case ro:
				access = "ro"
			}
		}
		if !ro {
			name := "<none>"
			if pol != nil {
				name = pol.Name
			}
			return nil, &planeError{http.StatusForbidden, fmt.Sprintf("access denied: export policy %q of volume %s does not allow client %s", name, v.Name, client)}
		}
		if v.JunctionPath == "/" {
			break
		}
		v, _ = m.resolvePath(svm.UUID, path.Dir(v.JunctionPath))
	}
	if qa, denied, ok := m.qtreeExportAccess(vol, rel, client); ok {
		if denied != nil {
			return nil, denied
		}
		access = qa
	}
	return &NFSExport{Volume: vol.Name, Directory: dir, Access: access}, nil
}

func statDir(p string) (bool, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return false, err
	}
	return fi.IsDir(), nil
}

func (s *Simulator) simNFSExport(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	exp, err := s.ResolveNFSExport(q.Get("server"), q.Get("client"), q.Get("path"))
	if err != nil {
		simError(w, err.(*planeError).status, "%s", err.Error())
		return
	}
	simJSON(w, http.StatusOK, exp)
}

// ISCSILUN is one LUN an initiator sees through a portal.
type ISCSILUN struct {
	LUN       int    `json:"lun"`
	Serial    string `json:"serial"`
	SerialHex string `json:"serialHex"`
	WWID      string `json:"wwid"` // what multipath shows: 3600a0980 + hex(serial)
	File      string `json:"file"`
	SizeBytes int64  `json:"sizeBytes"`
	Volume    string `json:"volume"`
	Path      string `json:"path"`
}

// ISCSILoginRequest is the body of POST /sim/iscsi/login.
type ISCSILoginRequest struct {
	Initiator string     `json:"initiator"`
	Portal    string     `json:"portal"`
	Target    string     `json:"target"`
	CHAP      *ISCSICHAP `json:"chap,omitempty"`
}

// ISCSICHAP are the initiator's CHAP settings (targetUsername/targetSecret
// for mutual CHAP).
type ISCSICHAP struct {
	Username       string `json:"username"`
	Secret         string `json:"secret"`
	TargetUsername string `json:"targetUsername,omitempty"`
	TargetSecret   string `json:"targetSecret,omitempty"`
}

// ISCSISession is the answer of a login or a LUN listing.
type ISCSISession struct {
	Target string     `json:"target"`
	LUNs   []ISCSILUN `json:"luns"`
}

// ISCSILogin checks a login (target, portal, CHAP) and lists the LUNs the
// initiator sees through that portal: those mapped to an igroup containing
// the initiator whose reporting nodes include the portal's node.
func (s *Simulator) ISCSILogin(req ISCSILoginRequest) (*ISCSISession, error) {
	return s.iscsiSession(req, true)
}

// ISCSILUNs lists the LUNs without a CHAP check (a rescan inside a session).
func (s *Simulator) ISCSILUNs(initiator, portal, target string) (*ISCSISession, error) {
	return s.iscsiSession(ISCSILoginRequest{Initiator: initiator, Portal: portal, Target: target}, false)
}

func (s *Simulator) iscsiSession(req ISCSILoginRequest, login bool) (*ISCSISession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.m
	if req.Initiator == "" || validateInitiator(req.Initiator, "iscsi") != nil {
		return nil, &planeError{http.StatusBadRequest, fmt.Sprintf("initiator %q is not an iSCSI name", req.Initiator)}
	}
	var svm *svmState
	for _, sv := range m.SVMs {
		if strings.EqualFold(sv.TargetIQN, req.Target) {
			svm = sv
		}
	}
	if svm == nil || !svm.ISCSI {
		return nil, &planeError{http.StatusNotFound, fmt.Sprintf("unknown target %q", req.Target)}
	}
	host, port := req.Portal, "3260"
	if h, p, err := net.SplitHostPort(req.Portal); err == nil {
		host, port = h, p
	}
	lif := m.lifByIP(svm.UUID, host, "data_iscsi")
	if lif == nil || port != "3260" {
		return nil, &planeError{http.StatusNotFound, fmt.Sprintf("portal %s is not an iSCSI LIF of SVM %s", req.Portal, svm.Name)}
	}
	if login {
		if err := checkCHAP(m.chapFor(svm.UUID, req.Initiator), req.CHAP); err != nil {
			return nil, err
		}
	}
	out := &ISCSISession{Target: svm.TargetIQN, LUNs: []ISCSILUN{}}
	for _, g := range m.igroupsWith(svm.UUID, req.Initiator) {
		if g.Protocol == "fcp" {
			continue
		}
		for _, lm := range m.mapsOfIGroup(g.UUID) {
			l := m.LUNs[lm.LUN]
			v := m.Volumes[l.Volume]
			if v == nil || v.State != "online" || !l.Enabled || !contains(lm.ReportingNodes, lif.Node) {
				continue
			}
			sh := hex.EncodeToString([]byte(l.Serial))
			out.LUNs = append(out.LUNs, ISCSILUN{
				LUN: lm.ID, Serial: l.Serial, SerialHex: sh, WWID: "3600a0980" + sh, File: s.lunFile(l.UUID),
				SizeBytes: l.Size, Volume: v.Name, Path: m.lunPath(l),
			})
		}
	}
	sort.Slice(out.LUNs, func(i, j int) bool { return out.LUNs[i].LUN < out.LUNs[j].LUN })
	return out, nil
}

func checkCHAP(cred *chapState, got *ISCSICHAP) error {
	denied := func(why string) error { return &planeError{http.StatusUnauthorized, "iSCSI login failed: " + why} }
	if cred == nil || cred.AuthType == "none" {
		return nil
	}
	if cred.AuthType == "deny" {
		return denied("the initiator is denied access")
	}
	if got == nil || got.Username == "" {
		return denied("CHAP authentication is required")
	}
	if got.Username != cred.InboundUser || got.Secret != cred.InboundPass {
		return denied("CHAP credentials do not match")
	}
	switch {
	case cred.OutboundUser != "" && (got.TargetUsername != cred.OutboundUser || got.TargetSecret != cred.OutboundPass):
		return denied("mutual CHAP: the target's credentials do not match the initiator's settings")
	case cred.OutboundUser == "" && got.TargetUsername != "":
		return denied("mutual CHAP requested but the target has no outbound credentials")
	}
	return nil
}

func (s *Simulator) simISCSILogin(w http.ResponseWriter, r *http.Request) {
	var req ISCSILoginRequest
	data, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(data, &req)
	}
	if err != nil {
		simError(w, http.StatusBadRequest, "invalid login request: %v", err)
		return
	}
	sess, err := s.ISCSILogin(req)
	if err != nil {
		simError(w, err.(*planeError).status, "%s", err.Error())
		return
	}
	simJSON(w, http.StatusOK, sess)
}

func (s *Simulator) simISCSILUNs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	sess, err := s.ISCSILUNs(q.Get("initiator"), q.Get("portal"), q.Get("target"))
	if err != nil {
		simError(w, err.(*planeError).status, "%s", err.Error())
		return
	}
	simJSON(w, http.StatusOK, sess)
}

func (s *Simulator) simSetFaults(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err != nil {
		simError(w, http.StatusBadRequest, "%v", err)
		return
	}
	spec := strings.TrimSpace(string(data))
	var wrapped struct {
		Spec string `json:"spec"`
	}
	if strings.HasPrefix(spec, "{") && json.Unmarshal(data, &wrapped) == nil {
		spec = wrapped.Spec
	}
	rules, err := ParseFaults(spec)
	if err != nil {
		simError(w, http.StatusBadRequest, "%v", err)
		return
	}
	s.SetFaults(rules)
	simJSON(w, http.StatusOK, map[string]any{"spec": faultSpec(rules)})
}

func faultSpec(rules []FaultRule) string {
	parts := make([]string, len(rules))
	for i, r := range rules {
		parts[i] = r.String()
	}
	return strings.Join(parts, ",")
}

type endpointJSON struct {
	Requests        int64   `json:"requests"`
	Faults          int64   `json:"faults"`
	InjectedSeconds float64 `json:"injected_seconds"`
}

type statsBody struct {
	Requests        int64                   `json:"requests"`
	Faults          int64                   `json:"faults"`
	Jobs            int64                   `json:"jobs"`
	JobSeconds      float64                 `json:"job_seconds"`
	InjectedSeconds float64                 `json:"injected_seconds"`
	Endpoints       map[string]endpointJSON `json:"endpoints"`
}

func statsJSON(st Stats) statsBody {
	out := statsBody{
		Requests: st.Requests, Faults: st.Faults, Jobs: st.Jobs,
		JobSeconds: st.JobTime.Seconds(), InjectedSeconds: st.Injected.Seconds(),
		Endpoints: map[string]endpointJSON{},
	}
	for k, e := range st.Endpoints {
		out.Endpoints[k] = endpointJSON{Requests: e.Requests, Faults: e.Faults, InjectedSeconds: e.Injected.Seconds()}
	}
	return out
}
