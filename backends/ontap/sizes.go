package ontap

import (
	"github.com/ontap-csi/ontap-csi/backends"
)

// ONTAP's size limits (docs/design/ontap-rest.md §4.2): a FlexVol holds at
// most 100 TiB and a file, so a LUN, 16 TiB, unless the volume has large
// size enabled (space.large_size_enabled, ONTAP 9.12.1 and later), which
// raises them to 300 TiB and 128 TiB. The driver checks them before it asks
// ONTAP, so a size ONTAP cannot hold is OutOfRange with a message that says
// why, and nothing is created.
const (
	tib             = int64(1) << 40
	maxFlexVol      = 100 * tib
	maxLargeFlexVol = 300 * tib
	maxFile         = 16 * tib
	maxLUN          = 128 * tib
)

// fitFlexVol returns the FlexVol that holds size usable bytes beside a
// snapshot reserve of reservePercent, times factor (an ontap-san LUN's
// headroom; a LUN of size bytes when lun is set), and whether it needs
// large size enabled.
func (d *driver) fitFlexVol(size int64, reservePercent int, factor float64, lun bool) (int64, bool, error) {
	if size > maxLargeFlexVol {
		// Checked before any arithmetic: flexVolSize works in float64.
		return 0, false, backends.Errorf(backends.ErrOutOfRange, "%d bytes exceed ONTAP's largest FlexVol (300 TiB)", size)
	}
	vol := flexVolSize(size, reservePercent, factor)
	large := vol > maxFlexVol || lun && size > maxFile
	switch {
	case vol > maxLargeFlexVol:
		return 0, false, backends.Errorf(backends.ErrOutOfRange,
			"%d bytes need a FlexVol of %d bytes with the snapshot reserve and LUN headroom, more than ONTAP's largest (300 TiB)", size, vol)
	case lun && size > maxLUN:
		return 0, false, backends.Errorf(backends.ErrOutOfRange, "%d bytes exceed ONTAP's largest LUN (128 TiB)", size)
	case large && !d.largeVolumes:
		return 0, false, backends.Errorf(backends.ErrOutOfRange,
			"%d bytes need a FlexVol over 100 TiB or a LUN over 16 TiB, which need ONTAP 9.12.1 or later (large volumes); %s runs %s",
			size, d.Name(), d.ontapVersion)
	}
	return vol, large, nil
}
