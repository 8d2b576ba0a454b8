package ontap

import "testing"

func TestFlexVolSize(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		want    int64
		reserve int
		factor  float64
		size    int64
	}{
		{gib, 0, 1, gib},
		{gib, 20, 1, 1342177280}, // 1 GiB / 0.8
		{10 * gib, 0, 1.1, 11811160064},
		{1, 0, 1, MinimumVolumeSize},
		{gib + 1, 0, 1, gib + 4096},
	} {
		if got := flexVolSize(tc.want, tc.reserve, tc.factor); got != tc.size {
			t.Errorf("flexVolSize(%d, %d, %v) = %d, want %d", tc.want, tc.reserve, tc.factor, got, tc.size)
		}
	}
}
