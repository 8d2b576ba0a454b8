package inventory

import (
	"encoding/json"
	"net/http"
	"time"
)

// Path is where Handler answers, on the controller's loopback REST
// server (--rest).
const Path = "/ontap-csi/v1/backends"

// Listing is Handler's answer.
type Listing struct {
	Backends []BackendStatus `json:"backends"`
	// Refreshed is when the backends were last listed; zero before the
	// first listing finished.
	Refreshed time.Time `json:"refreshed"`
}

// Handler answers GET Path with every backend's status, from the cache.
func (inv *Inventory) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Listing{Backends: inv.Backends(), Refreshed: inv.Refreshed()})
	})
}
