package cluster_test

import (
	"slices"
	"testing"
	"time"
)

func TestDriftFlagDuration(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
		err  bool
	}{
		{[]string{"--v=2", "--timeout=600s"}, defaultReconcileSync, false},
		{[]string{"--v=2", "--reconcile-sync=30s"}, 30 * time.Second, false},
		{[]string{"--reconcile-sync", "2m"}, 2 * time.Minute, false},
		{[]string{"--reconcile-sync=soon"}, 0, true},
		{[]string{"--reconcile-sync-other=5s"}, defaultReconcileSync, false},
	} {
		got, err := flagDuration(tc.args, "--reconcile-sync", defaultReconcileSync)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("flagDuration(%v) = %s, %v; want %s, error %v", tc.args, got, err, tc.want, tc.err)
		}
	}
}

func TestDriftLastJournalLine(t *testing.T) {
	seq, at, err := lastJournalLine([]byte("1 2026-12-04T16:00:00.1Z keep-nas\n2 2026-12-04T16:00:00.3Z keep-nas\n"))
	if err != nil || seq != 2 || !at.Equal(time.Date(2026, 12, 4, 16, 0, 0, 3e8, time.UTC)) {
		t.Errorf("got %d %s %v", seq, at, err)
	}
	// A line still being written is left out.
	seq, _, err = lastJournalLine([]byte("1 2026-12-04T16:00:00.1Z keep-nas\n2 2026-12-04T16:00:0"))
	if err != nil || seq != 1 {
		t.Errorf("with a partial last line: %d, %v", seq, err)
	}
	for _, bad := range []string{"", "2 2026-12-04T16:00:00.3Z p", "x 2026-12-04T16:00:00.3Z p\n", "3 yesterday p\n", "4 2026-12-04T16:00:00.3Z\n"} {
		if _, _, err := lastJournalLine([]byte(bad)); err == nil {
			t.Errorf("lastJournalLine(%q): no error", bad)
		}
	}
}

func TestDriftCRILogLines(t *testing.T) {
	log := []byte(`2026-12-04T16:00:00.000000001Z stderr F attaching va-1
2026-12-04T16:00:02.5Z stderr F "VolumeAttachment attached status and actual state do not match" VolumeAttachment="va-1" found=false
2026-12-04T16:00:03Z stderr F "VolumeAttachment attached status and actual state do not match" VolumeAttachment="va-2" found=false
not a CRI line
2026-12-04T16:00:04Z stdout F time=x level=info msg="publishing volume" volume=v1 node=n1
`)
	since := time.Date(2026, 12, 4, 16, 0, 1, 0, time.UTC)
	got := criLogLines(log, since, "va-1")
	want := []string{`16:00:02.500 "VolumeAttachment attached status and actual state do not match" VolumeAttachment="va-1" found=false`}
	if !slices.Equal(got, want) {
		t.Errorf("va-1 since 16:00:01:\n got %q\nwant %q", got, want)
	}
	if got := criLogLines(log, since, "publishing volume", "v1"); len(got) != 1 {
		t.Errorf("publishing v1: %q", got)
	}
	if got := criLogLines(log, since, "publishing volume", "v2"); len(got) != 0 {
		t.Errorf("publishing v2: %q", got)
	}
}
