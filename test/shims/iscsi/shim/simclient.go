package shim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// simClient talks to the simulator's iSCSI data plane, the stand-in for a
// target's login and REPORT LUNS/INQUIRY answers.
type simClient struct {
	base string
	hc   *http.Client
}

// simLUN is one LUN the simulator exposes to an initiator through a portal.
type simLUN struct {
	LUN       int    `json:"lun"`
	Serial    string `json:"serial"`
	SerialHex string `json:"serialHex"`
	WWID      string `json:"wwid"`
	File      string `json:"file"`
	SizeBytes int64  `json:"sizeBytes"`
	Volume    string `json:"volume"`
	Path      string `json:"path"`
}

type simSession struct {
	Target string   `json:"target"`
	LUNs   []simLUN `json:"luns"`
}

type simCHAP struct {
	Username       string `json:"username"`
	Secret         string `json:"secret"`
	TargetUsername string `json:"targetUsername,omitempty"`
	TargetSecret   string `json:"targetSecret,omitempty"`
}

type loginRequest struct {
	Initiator string   `json:"initiator"`
	Portal    string   `json:"portal"`
	Target    string   `json:"target"`
	CHAP      *simCHAP `json:"chap,omitempty"`
}

// simError is a refusal of the simulator, with its HTTP status: 401 CHAP,
// 404 unknown target or portal.
type simError struct {
	Status int
	Msg    string
}

func (e *simError) Error() string { return fmt.Sprintf("simulator: %d %s", e.Status, e.Msg) }

func (s *simClient) login(req loginRequest) (*simSession, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	resp, err := s.hc.Post(s.base+"/sim/iscsi/login", "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	return decodeSession(resp)
}

func (s *simClient) luns(initiator, portal, target string) (*simSession, error) {
	q := url.Values{"initiator": {initiator}, "portal": {portal}, "target": {target}}
	resp, err := s.hc.Get(s.base + "/sim/iscsi/luns?" + q.Encode())
	if err != nil {
		return nil, err
	}
	return decodeSession(resp)
}

func decodeSession(resp *http.Response) (*simSession, error) {
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(data, &e)
		return nil, &simError{Status: resp.StatusCode, Msg: e.Error}
	}
	var s simSession
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("simulator answer: %w", err)
	}
	return &s, nil
}
