package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"
)

// ontap reads the simulator through its ONTAP REST API, as an admin would
// with the CLI: what the driver left on the storage.
type ontap struct {
	http *http.Client // reaches the simulator through the forwarded socket
	base string       // https://<management LIF>
	// seen is every listing objects made, so that the report can show
	// what a scenario's volumes had on ONTAP while it ran.
	mu   sync.Mutex
	seen []ontapListing
}

// ontapListing is the SVM's objects at one time.
type ontapListing struct {
	At      time.Time
	Objects ontapObjects
}

// get fetches a collection's records with the given fields.
func (o *ontap) get(ctx context.Context, path, fields string, out any) error {
	return o.getWhere(ctx, path, fields, nil, out)
}

// getWhere is get with query filters (ONTAP's field=value).
func (o *ontap) getWhere(ctx context.Context, path, fields string, where url.Values, out any) error {
	q := url.Values{"fields": {fields}, "max_records": {"10000"}}
	for k, v := range where {
		q[k] = v
	}
	body, err := o.call(ctx, http.MethodGet, path+"?"+q.Encode())
	if err != nil {
		return err
	}
	return json.Unmarshal(body, &struct {
		Records any `json:"records"`
	}{Records: out})
}

// delete deletes one object, as an admin would by hand.
func (o *ontap) delete(ctx context.Context, path string) error {
	_, err := o.call(ctx, http.MethodDelete, path)
	return err
}

// call sends a request without a body and returns the answer's body; any
// status but 200 is an error.
func (o *ontap) call(ctx context.Context, method, pathQuery string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, o.base+pathQuery, nil)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth("admin", "password")
	resp, err := o.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, &statusError{code: resp.StatusCode, text: fmt.Sprintf("%s %s: %s: %s", method, pathQuery, resp.Status, body)}
	}
	return body, nil
}

// statusError is an answer other than 200.
type statusError struct {
	code int
	text string
}

func (e *statusError) Error() string { return e.text }

// notFound says whether err is ONTAP's 404.
func notFound(err error) bool {
	var se *statusError
	return errors.As(err, &se) && se.code == http.StatusNotFound
}

type named struct {
	Name string `json:"name"`
	UUID string `json:"uuid"`
	ID   int    `json:"id"`
}

// ontapObjects is what the SVM holds, one line per object, sorted:
// volumes, snapshots, LUNs, igroups with their initiators, LUN maps,
// export policies with their rules' clients.
type ontapObjects []string

func (o *ontap) objects(ctx context.Context) (ontapObjects, error) {
	var out ontapObjects
	var vols []named
	if err := o.get(ctx, "/api/storage/volumes", "name,uuid", &vols); err != nil {
		return nil, err
	}
	for _, v := range vols {
		out = append(out, "volume "+v.Name)
	}
	// Every volume's snapshots in one listing: asked volume by volume, a
	// volume that another scenario deletes meanwhile answers 404.
	var snaps []struct {
		Name   string `json:"name"`
		Volume named  `json:"volume"`
	}
	if err := o.get(ctx, "/api/storage/volumes/*/snapshots", "name,volume.name", &snaps); err != nil {
		return nil, err
	}
	for _, s := range snaps {
		out = append(out, "snapshot "+s.Volume.Name+"@"+s.Name)
	}
	var luns []named
	if err := o.get(ctx, "/api/storage/luns", "name", &luns); err != nil {
		return nil, err
	}
	for _, l := range luns {
		out = append(out, "lun "+l.Name)
	}
	var igroups []struct {
		Name       string  `json:"name"`
		Initiators []named `json:"initiators"`
	}
	if err := o.get(ctx, "/api/protocols/san/igroups", "name,initiators.name", &igroups); err != nil {
		return nil, err
	}
	for _, ig := range igroups {
		var iqns []string
		for _, i := range ig.Initiators {
			iqns = append(iqns, i.Name)
		}
		out = append(out, fmt.Sprintf("igroup %s %v", ig.Name, iqns))
	}
	var maps []struct {
		LUN    named `json:"lun"`
		Igroup named `json:"igroup"`
		Number int   `json:"logical_unit_number"`
	}
	if err := o.get(ctx, "/api/protocols/san/lun-maps", "lun.name,igroup.name,logical_unit_number", &maps); err != nil {
		return nil, err
	}
	for _, m := range maps {
		out = append(out, fmt.Sprintf("lun-map %s -> %s (LUN %d)", m.LUN.Name, m.Igroup.Name, m.Number))
	}
	policies, err := o.exportPolicies(ctx)
	if err != nil {
		return nil, err
	}
	for name, clients := range policies {
		out = append(out, fmt.Sprintf("export-policy %s %v", name, clients))
	}
	sort.Strings(out)
	o.mu.Lock()
	o.seen = append(o.seen, ontapListing{At: time.Now(), Objects: out})
	o.mu.Unlock()
	return out, nil
}

// seenDuring is every object naming one of vols in the listings made
// between from and to, sorted.
func (o *ontap) seenDuring(from, to time.Time, vols []string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	set := map[string]bool{}
	for _, l := range o.seen {
		if l.At.Before(from) || l.At.After(to) {
			continue
		}
		for _, line := range l.Objects.about(vols) {
			set[line] = true
		}
	}
	out := make([]string, 0, len(set))
	for line := range set {
		out = append(out, line)
	}
	sort.Strings(out)
	return out
}

// about returns the lines that name one of vols: the volumes, their
// snapshots, LUNs, LUN maps and export policies.
func (objs ontapObjects) about(vols []string) ontapObjects {
	var out ontapObjects
	for _, l := range objs {
		for _, v := range vols {
			if strings.Contains(l, v) {
				out = append(out, l)
				break
			}
		}
	}
	return out
}

// exportPolicies maps each export policy to its rules' client matches.
func (o *ontap) exportPolicies(ctx context.Context) (map[string][]string, error) {
	var policies []named
	if err := o.get(ctx, "/api/protocols/nfs/export-policies", "name,id", &policies); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, p := range policies {
		var rules []struct {
			Clients []struct {
				Match string `json:"match"`
			} `json:"clients"`
		}
		err := o.get(ctx, fmt.Sprintf("/api/protocols/nfs/export-policies/%d/rules", p.ID), "clients", &rules)
		if notFound(err) {
			// Deleted since the listing (a volume's last unpublish deletes
			// its policy): the scenario 7.2a of 2026-12-05 failed on that.
			continue
		}
		if err != nil {
			return nil, err
		}
		clients := []string{}
		for _, r := range rules {
			for _, c := range r.Clients {
				clients = append(clients, c.Match)
			}
		}
		sort.Strings(clients)
		out[p.Name] = clients
	}
	return out, nil
}

// with returns the lines that contain every one of the words.
func (objs ontapObjects) with(words ...string) []string {
	var out []string
	for _, l := range objs {
		all := true
		for _, w := range words {
			all = all && strings.Contains(l, w)
		}
		if all {
			out = append(out, l)
		}
	}
	return out
}

// diff returns the lines added and removed from before to after.
func (objs ontapObjects) diff(after ontapObjects) (added, removed []string) {
	return diff(objs, after)
}
