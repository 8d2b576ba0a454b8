package ontapsim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// The file data plane cannot fence a host: the test shims bind a loop
// device to a LUN's file, and nothing can take a loop device's file away
// from it while a file system on it is mounted. A real ONTAP stops serving
// an initiator whose LUN map is gone (its I/O fails from then on). With
// cut-on-unmap set, deleting a LUN map (or a mapped igroup) gives the LUN a
// new file: a copy of the old one, renamed over it. A loop device bound
// before the unmap keeps working on the old inode, so what the unmapped host
// writes from then on never reaches the LUN any later host attaches, and
// the old inode is kept under Cut.File to show what it wrote.
//
// The cut is of the whole LUN, not of one initiator: every host attached at
// the unmap is cut. So it is opt-in, for a scenario in which the unmapped
// host is the LUN's only writer (a ReadWriteOnce failover). The kernel data
// plane fences for real (LIO drops the initiator's ACL) and ignores it.

// DataPlaneCut is one LUN cut off its writers by an unmap.
type DataPlaneCut struct {
	At time.Time `json:"at"`
	// LUN is the LUN's path, Igroup the igroup whose map was deleted and
	// Initiators its members then.
	LUN        string   `json:"lun"`
	Igroup     string   `json:"igroup"`
	Initiators []string `json:"initiators"`
	// File keeps the inode the cut hosts still write to.
	File string `json:"file"`
}

// DataPlaneMode is the body of GET and PUT /sim/dataplane.
type DataPlaneMode struct {
	CutOnUnmap bool           `json:"cutOnUnmap"`
	Cuts       []DataPlaneCut `json:"cuts,omitempty"`
}

// SetCutOnUnmap turns cut-on-unmap on or off.
func (s *Simulator) SetCutOnUnmap(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cutOnUnmap = on
}

// DataPlane returns the mode and the cuts made so far.
func (s *Simulator) DataPlane() DataPlaneMode {
	s.mu.Lock()
	defer s.mu.Unlock()
	return DataPlaneMode{CutOnUnmap: s.cutOnUnmap, Cuts: append([]DataPlaneCut(nil), s.cuts...)}
}

// cutLocked cuts the writers of a map's LUN before the map goes, when asked
// to. A LUN whose copy fails keeps its file, and the failure is the
// request's: a cut that silently did not happen would let the scenario
// show a fence that was not there.
func (s *Simulator) cutLocked(lm *lunMapState) *apiError {
	if !s.cutOnUnmap || s.kernel != nil {
		return nil
	}
	l, g := s.m.LUNs[lm.LUN], s.m.IGroups[lm.IGroup]
	if l == nil || g == nil {
		return nil
	}
	file := s.lunFile(l.UUID)
	kept := fmt.Sprintf("%s.cut-%d", file, len(s.cuts)+1)
	tmp := file + ".cutting"
	err := os.Link(file, kept)
	if err == nil {
		err = copyFileSparse(file, tmp, 0o600)
	}
	if err == nil {
		err = os.Rename(tmp, file)
	}
	if err != nil {
		os.Remove(tmp)
		return newError(http.StatusInternalServerError, codeJobFailed, "", "cutting the writers of LUN %s: %v", s.m.lunPath(l), err)
	}
	var members []string
	for _, i := range g.Initiators {
		members = append(members, i.Name)
	}
	s.cuts = append(s.cuts, DataPlaneCut{At: time.Now(), LUN: s.m.lunPath(l), Igroup: g.Name, Initiators: members, File: kept})
	return nil
}

func (s *Simulator) simDataPlane(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPut {
		var body DataPlaneMode
		data, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
		if err == nil {
			err = json.Unmarshal(data, &body)
		}
		if err != nil {
			simError(w, http.StatusBadRequest, "dataplane: %v", err)
			return
		}
		if s.kernel != nil && body.CutOnUnmap {
			simError(w, http.StatusConflict, "the kernel data plane fences for real; cut-on-unmap is for the file data plane")
			return
		}
		s.SetCutOnUnmap(body.CutOnUnmap)
	}
	simJSON(w, http.StatusOK, s.DataPlane())
}
