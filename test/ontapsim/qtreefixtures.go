package ontapsim

import (
	"net/http"
	"sort"
)

// QtreeInfo is a read-only view of an explicit qtree.
type QtreeInfo struct {
	Volume          string // volume name
	ID              int
	Name            string
	ExportPolicy    string // in force: the qtree's own or its volume's
	UnixPermissions int
	SecurityStyle   string
	Directory       string // backing directory
	// HardLimit is the tree quota in force (own or derived), -1 for none.
	HardLimit int64
}

// QuotaRuleInfo is a read-only view of a tree quota rule.
type QuotaRuleInfo struct {
	UUID      string
	Volume    string // volume name
	Qtree     string // "" for the default rule
	HardLimit int64
	Active    bool
}

// Qtrees lists every explicit qtree, by volume then id.
func (s *Simulator) Qtrees() []QtreeInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.m
	var out []QtreeInfo
	for _, q := range m.Qtrees {
		v := m.Volumes[q.Volume]
		if v == nil {
			continue
		}
		qi := QtreeInfo{
			Volume: v.Name, ID: q.ID, Name: q.Name, UnixPermissions: q.UnixPermissions, SecurityStyle: q.SecurityStyle,
			Directory: s.qtreeDir(q), HardLimit: m.qtreeLimit(q),
		}
		if p := m.qtreePolicy(q); p != nil {
			qi.ExportPolicy = p.Name
		}
		out = append(out, qi)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Volume != out[j].Volume {
			return out[i].Volume < out[j].Volume
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// QuotaRules lists every tree quota rule, by volume then qtree.
func (s *Simulator) QuotaRules() []QuotaRuleInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []QuotaRuleInfo
	for _, r := range s.m.QuotaRules {
		if v := s.m.Volumes[r.Volume]; v != nil {
			out = append(out, QuotaRuleInfo{UUID: r.UUID, Volume: v.Name, Qtree: r.Qtree, HardLimit: r.HardLimit, Active: r.Active})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Volume+"/"+out[i].Qtree < out[j].Volume+"/"+out[j].Qtree
	})
	return out
}

// QuotaState is a volume's quota state: "off", "initializing" or "on" ("" if
// there is no such volume).
func (s *Simulator) QuotaState(volume string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.m.volumeByName(s.m.dataSVM().UUID, volume)
	if v == nil {
		return ""
	}
	return s.m.quotaState(v.UUID)
}

// CreateQtree creates a qtree through the REST API, as Trident does
// (exportPolicy "" inherits the volume's, unixPermissions 0 too).
func (s *Simulator) CreateQtree(volume, name, exportPolicy string, unixPermissions int) error {
	body := map[string]any{"name": name, "volume": map[string]any{"name": volume}, "svm": map[string]any{"name": s.Info().SVM}}
	if exportPolicy != "" {
		body["export_policy"] = map[string]any{"name": exportPolicy}
	}
	if unixPermissions != 0 {
		body["unix_permissions"] = unixPermissions
	}
	_, _, err := s.Do(http.MethodPost, "/api/storage/qtrees", body)
	return err
}

// SetTreeQuota creates a tree quota rule (qtree "" is the default rule) with
// a hard limit in bytes (-1: none), as Trident does. With quotas on, a rule
// that needs a reinitialization fails with 5308571 but is kept.
func (s *Simulator) SetTreeQuota(volume, qtree string, hardLimit int64) error {
	body := map[string]any{
		"svm": map[string]any{"name": s.Info().SVM}, "volume": map[string]any{"name": volume},
		"type": "tree", "qtree": map[string]any{"name": qtree}, "space": map[string]any{"hard_limit": hardLimit},
	}
	_, _, err := s.Do(http.MethodPost, "/api/storage/quota/rules", body)
	return err
}

// SetQuotaEnabled turns a volume's quotas on (initializing them) or off.
func (s *Simulator) SetQuotaEnabled(volume string, enabled bool) error {
	v, ok := s.Volume(volume)
	if !ok {
		return errNotFound(codeNotFound, "volume", "volume %q does not exist", volume)
	}
	_, _, err := s.Do(http.MethodPatch, "/api/storage/volumes/"+v.UUID, map[string]any{"quota": map[string]any{"enabled": enabled}})
	return err
}
