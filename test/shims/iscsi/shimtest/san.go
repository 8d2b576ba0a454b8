package shimtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// SAN sets up LUNs on the ONTAP simulator through its REST API, the way a
// controller would: volume, LUN, igroup, map. Only what tests of the data
// path need.
type SAN struct {
	t        testing.TB
	base     string
	hc       *http.Client
	user     string
	password string
	svmUUID  string
	aggr     string
	// Target is the SVM's iSCSI target IQN, Portals its iSCSI LIFs.
	Target  string
	Portals []string
}

// LUN is a LUN created by CreateLUN.
type LUN struct {
	UUID   string
	Path   string // /vol/<volume>/lun0
	Volume string
	Serial string
	Size   int64
}

// NewSAN looks up the simulator's data SVM, an aggregate, the iSCSI target
// and its portals. user and password default to the simulator's.
func NewSAN(t testing.TB, simURL string) *SAN {
	t.Helper()
	s := &SAN{t: t, base: strings.TrimSuffix(simURL, "/"), hc: &http.Client{Timeout: 2 * time.Minute}, user: "admin", password: "password"}
	var svms struct {
		Records []struct{ UUID, Name string }
	}
	s.do("GET", "/api/svm/svms?fields=uuid,name", nil, &svms)
	if len(svms.Records) == 0 {
		t.Fatal("simulator has no SVM")
	}
	s.svmUUID = svms.Records[0].UUID
	var aggrs struct{ Records []struct{ Name string } }
	s.do("GET", "/api/storage/aggregates?fields=name", nil, &aggrs)
	if len(aggrs.Records) == 0 {
		t.Fatal("simulator has no aggregate")
	}
	s.aggr = aggrs.Records[0].Name
	var svc struct{ Target struct{ Name string } }
	s.do("GET", "/api/protocols/san/iscsi/services/"+s.svmUUID+"?fields=target.name", nil, &svc)
	s.Target = svc.Target.Name
	var lifs struct {
		Records []struct {
			IP       struct{ Address string }
			Services []string
		}
	}
	s.do("GET", "/api/network/ip/interfaces?fields=ip,services", nil, &lifs)
	for _, l := range lifs.Records {
		if slices.Contains(l.Services, "data_iscsi") {
			s.Portals = append(s.Portals, l.IP.Address)
		}
	}
	if s.Target == "" || len(s.Portals) == 0 {
		t.Fatalf("simulator has no iSCSI target or portal (target %q, portals %v)", s.Target, s.Portals)
	}
	return s
}

// CreateLUN creates volume name with one LUN of size bytes in it.
func (s *SAN) CreateLUN(name string, size int64) LUN {
	s.t.Helper()
	s.do("POST", "/api/storage/volumes?return_timeout=120", map[string]any{
		"name": name, "svm": map[string]any{"uuid": s.svmUUID},
		"aggregates": []any{map[string]any{"name": s.aggr}}, "size": size*2 + 64<<20,
	}, nil)
	path := "/vol/" + name + "/lun0"
	s.do("POST", "/api/storage/luns?return_timeout=120", map[string]any{
		"name": path, "svm": map[string]any{"uuid": s.svmUUID}, "os_type": "linux",
		"space": map[string]any{"size": size},
	}, nil)
	return s.GetLUN(path)
}

// GetLUN reads a LUN back (serial, size).
func (s *SAN) GetLUN(path string) LUN {
	s.t.Helper()
	var luns struct {
		Records []struct {
			UUID, Name   string
			SerialNumber string `json:"serial_number"`
			Location     struct{ Volume struct{ Name string } }
			Space        struct{ Size int64 }
		}
	}
	s.do("GET", "/api/storage/luns?fields=uuid,name,serial_number,location,space&name="+url.QueryEscape(path), nil, &luns)
	if len(luns.Records) != 1 {
		s.t.Fatalf("LUN %s: %d records", path, len(luns.Records))
	}
	r := luns.Records[0]
	return LUN{UUID: r.UUID, Path: r.Name, Volume: r.Location.Volume.Name, Serial: r.SerialNumber, Size: r.Space.Size}
}

// CreateIgroup creates an iSCSI igroup holding initiators.
func (s *SAN) CreateIgroup(name string, initiators ...string) {
	s.t.Helper()
	body := map[string]any{"name": name, "protocol": "iscsi", "os_type": "linux", "svm": map[string]any{"uuid": s.svmUUID}}
	if len(initiators) > 0 {
		var ins []any
		for _, i := range initiators {
			ins = append(ins, map[string]any{"name": i})
		}
		body["initiators"] = ins
	}
	s.do("POST", "/api/protocols/san/igroups", body, nil)
}

// Map maps l to igroup with LUN id (-1: the lowest free one, as ONTAP
// picks) and returns the id.
func (s *SAN) Map(l LUN, igroup string, id int) int {
	s.t.Helper()
	body := map[string]any{"lun": map[string]any{"uuid": l.UUID}, "igroup": map[string]any{"name": igroup}, "svm": map[string]any{"uuid": s.svmUUID}}
	if id >= 0 {
		body["logical_unit_number"] = id
	}
	var resp struct {
		Records []struct {
			LUN int `json:"logical_unit_number"`
		}
	}
	s.do("POST", "/api/protocols/san/lun-maps?return_records=true", body, &resp)
	if len(resp.Records) != 1 {
		s.t.Fatalf("map %s to %s: %d records", l.Path, igroup, len(resp.Records))
	}
	return resp.Records[0].LUN
}

// Unmap removes the map of l to igroup.
func (s *SAN) Unmap(l LUN, igroup string) {
	s.t.Helper()
	var igs struct{ Records []struct{ UUID string } }
	s.do("GET", "/api/protocols/san/igroups?fields=uuid&name="+url.QueryEscape(igroup), nil, &igs)
	if len(igs.Records) != 1 {
		s.t.Fatalf("igroup %s: %d records", igroup, len(igs.Records))
	}
	s.do("DELETE", "/api/protocols/san/lun-maps/"+l.UUID+"/"+igs.Records[0].UUID, nil, nil)
}

// ResizeLUN grows l to size bytes.
func (s *SAN) ResizeLUN(l LUN, size int64) {
	s.t.Helper()
	s.do("PATCH", "/api/storage/luns/"+l.UUID+"?return_timeout=120", map[string]any{"space": map[string]any{"size": size}}, nil)
}

// SetCHAP requires CHAP for initiator on the SVM (mutual when targetUser
// is set).
func (s *SAN) SetCHAP(initiator, user, secret, targetUser, targetSecret string) {
	s.t.Helper()
	chap := map[string]any{"inbound": map[string]any{"user": user, "password": secret}}
	if targetUser != "" {
		chap["outbound"] = map[string]any{"user": targetUser, "password": targetSecret}
	}
	s.do("POST", "/api/protocols/san/iscsi/credentials", map[string]any{
		"svm": map[string]any{"uuid": s.svmUUID}, "initiator": initiator, "authentication_type": "chap", "chap": chap,
	}, nil)
}

func (s *SAN) do(method, path string, body, out any) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	req.SetBasicAuth(s.user, s.password)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		s.t.Fatalf("%s %s: %s: %s", method, path, resp.Status, data)
	}
	if resp.StatusCode == http.StatusAccepted {
		s.t.Fatalf("%s %s: job still running after return_timeout: %s", method, path, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			s.t.Fatalf("%s %s: %v: %s", method, path, err, data)
		}
	}
}

// String is for test logs.
func (l LUN) String() string {
	return fmt.Sprintf("%s (serial %s, %d bytes)", l.Path, l.Serial, l.Size)
}
