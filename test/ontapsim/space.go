package ontapsim

import (
	"fmt"
	"os"
	"syscall"
)

// Space accounting (docs/design/ontap-rest.md §4.3). Usage is measured from the backing
// files, so it follows what the data plane really wrote:
//   - a volume's used space is its directory plus its LUNs (a LUN with
//     space.guarantee.requested counts its full size, a thin one what is
//     allocated in its file); snapshots are free (a new ONTAP snapshot is
//     ~0 and we do not track block sharing);
//   - a thick volume (guarantee volume) takes its full size from the
//     aggregate, a thin one (guarantee none) only its used space; an
//     unsplit FlexClone takes only its used space whatever its guarantee;
//   - volumes in the recovery queue still take space.
//
// Measurements are memoised per request in a usage cache.
type usage struct {
	s    *Simulator
	used map[string]int64 // volume uuid -> used bytes
}

func (s *Simulator) newUsage() *usage { return &usage{s: s, used: map[string]int64{}} }

func fileAllocated(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}

func (u *usage) lunUsed(l *lunState) int64 {
	return fileAllocated(u.s.lunFile(l.UUID))
}

func (u *usage) volumeUsed(v *volumeState) int64 {
	if n, ok := u.used[v.UUID]; ok {
		return n
	}
	var n int64
	if !u.s.cfg.NoDataUsage {
		n = diskUsage(u.s.volumeDir(v.UUID))
	}
	for _, l := range u.s.m.lunsOfVolume(v.UUID) {
		if l.Reserved {
			n += l.Size
		} else {
			n += u.lunUsed(l)
		}
	}
	u.used[v.UUID] = n
	return n
}

func (u *usage) footprint(v *volumeState) int64 {
	if v.Guarantee == "volume" && v.CloneParent == "" {
		return max(v.Size, u.volumeUsed(v))
	}
	return u.volumeUsed(v)
}

func (u *usage) aggrUsed(a *aggrState) int64 {
	var n int64
	for _, v := range u.s.m.Volumes {
		if v.Aggregate == a.UUID {
			n += u.footprint(v)
		}
	}
	for _, v := range u.s.m.RecoveryQueue {
		if v.Aggregate == a.UUID {
			n += u.footprint(v)
		}
	}
	return n
}

func (u *usage) aggrAvailable(a *aggrState) int64 { return max(0, a.Size-u.aggrUsed(a)) }

func afsTotal(v *volumeState) int64 { return v.Size * int64(100-v.ReservePercent) / 100 }

// volumeAvailable is what can still be written into the volume.
func (u *usage) volumeAvailable(v *volumeState) int64 {
	avail := max(0, afsTotal(v)-u.volumeUsed(v))
	if v.Guarantee != "volume" || v.CloneParent != "" {
		if a := u.s.m.aggr(v.Aggregate); a != nil {
			avail = min(avail, u.aggrAvailable(a))
		}
	}
	return avail
}

// humanSize formats bytes the way ONTAP messages do ("104MB", "1.50GB").
func humanSize(n int64) string {
	units := []string{"B", "KB", "MB", "GB", "TB", "PB"}
	f := float64(n)
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if f == float64(int64(f)) {
		return fmt.Sprintf("%d%s", int64(f), units[i])
	}
	return fmt.Sprintf("%.2f%s", f, units[i])
}

// errAggrSpace is the job failure of a thick create/grow that does not fit
// (text as on ONTAP; the REST code is undocumented, docs/design/ontap-rest.md §3.5).
func errAggrSpace(m *model, what string, v *volumeState, a *aggrState, need, avail int64) *apiError {
	node := ""
	if n := m.node(a.Node); n != nil {
		node = n.Name
	}
	return &apiError{Status: 500, Code: fmt.Sprint(codeJobFailed), Message: fmt.Sprintf(
		"Failed to %s the volume on node %q. Reason: Request to %s volume %q failed because there is not enough space in aggregate %q. Either create %s of free space in the aggregate or select a size of at most %s for the volume.",
		what, node, what, v.Name, a.Name, humanSize(need-avail), humanSize(avail))}
}
