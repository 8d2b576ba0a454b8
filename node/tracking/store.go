package tracking

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ontap-csi/ontap-csi/internal/atomicfile"
	"github.com/ontap-csi/ontap-csi/internal/sharedread"
)

// ErrNotFound means the node holds no state for the volume.
var ErrNotFound = errors.New("no tracking file for the volume")

// ErrCorrupt means a state file exists but does not parse (truncated,
// hand-edited, not a tracking file).
var ErrCorrupt = errors.New("tracking file does not parse")

// LegacyPublishInfoFile is where Trident before 23.01 kept the publish info,
// inside the staging target path.
const LegacyPublishInfoFile = "volumePublishInfo.json"

// maxFileSize bounds what is read from a state file. Real files are a few
// hundred bytes; the bound keeps a corrupt or hostile file from costing memory.
const maxFileSize = 1 << 20

// volumeIDPattern is what may name a tracking file. Trident's volume ids are
// PV names (DNS subdomains); the pattern also admits upper case and '_' but
// never '/', a leading '.', or anything longer than the CSI string limit.
var volumeIDPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)

// ValidVolumeID reports whether id can name a tracking file in the tracking
// directory without escaping it.
func ValidVolumeID(id string) bool { return volumeIDPattern.MatchString(id) }

// Store is the tracking directory.
type Store struct {
	dir string
	// confine checks a staging path read from a legacy tracking file (the
	// file is on the host, so the path is not trusted any more than a
	// request's) and returns the path to open.
	confine func(string) (string, error)
	// records reads every tracking file for the calls whose reads
	// overlap (Others).
	records *sharedread.Read[map[string]*Info]
}

// NewStore returns the store in dir. The directory is created by the first
// write, not here: a node plugin that only starts (a probe, a test, a node
// without volumes) leaves the host untouched. confine vets the staging paths
// that legacy tracking files point to.
func NewStore(dir string, confine func(string) (string, error)) (*Store, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("tracking dir %q is not absolute", dir)
	}
	s := &Store{dir: filepath.Clean(dir), confine: confine}
	s.records = sharedread.New(s.readAll)
	return s, nil
}

// Dir is the tracking directory.
func (s *Store) Dir() string { return s.dir }

// Path is the tracking file of volumeID.
func (s *Store) Path(volumeID string) (string, error) {
	if !ValidVolumeID(volumeID) {
		return "", fmt.Errorf("volume id %q cannot name a tracking file", volumeID)
	}
	return filepath.Join(s.dir, volumeID+".json"), nil
}

// Read returns the state of volumeID, or ErrNotFound. A legacy tracking file
// whose volumePublishInfo.json is gone yields an Info with an empty
// PublishInfo rather than an error: unstage must still be able to clean up
// (Trident #706 failed here with FailedPrecondition and never recovered).
func (s *Store) Read(volumeID string) (*Info, error) {
	path, err := s.Path(volumeID)
	if err != nil {
		return nil, err
	}
	data, err := readFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	info, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, ErrCorrupt, err)
	}
	if !info.Legacy {
		return info, nil
	}
	staging, err := s.confine(info.StagingTargetPath)
	if err != nil {
		return nil, fmt.Errorf("%s: staging path: %w", path, err)
	}
	legacyPath := filepath.Join(staging, LegacyPublishInfoFile)
	data, err = readFile(legacyPath)
	if errors.Is(err, os.ErrNotExist) {
		return info, nil
	}
	if err != nil {
		return nil, err
	}
	pi, err := DecodePublishInfo(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %v", legacyPath, ErrCorrupt, err)
	}
	info.PublishInfo = *pi
	return info, nil
}

// Write stores info as volumeID's tracking file in Trident's 23.01+ format,
// atomically (a new file renamed over the old one): a reader sees the old
// file or the new one, also after the process is killed at any point.
//
// Write does not fsync. The fsync policy follows from what each kind of
// crash leaves (docs/design/architecture.md §3: the tracking files are the
// node's only state):
//   - The process dies (SIGKILL, OOM, a handover gone wrong (I8)): the
//     renamed file is in the page cache and every later reader, this
//     process's successor included, sees it. An fsync adds nothing.
//   - The node loses power or its kernel panics: the rename may be lost,
//     or the file found empty. But the reboot also drops every mount,
//     every SCSI device and multipath map and every NFS client, which is
//     what the records describe, and kubelet stages and publishes again: a
//     stage finds no record or an unreadable one (which it moves aside and
//     replaces, readStateForStage), an unstage or unpublish finds nothing
//     mounted. A record that lags the truth by its last step is what a
//     reboot makes true anyway.
//
// The one fact that outlives a power loss is on the LUN, on ONTAP: a
// format that was under way. Its record is written with WriteDurable.
// An fsync costs about a millisecond on an idle disk and far more on a
// busy one, and stage and publish wrote 2–4 records each.
func (s *Store) Write(volumeID string, info *Info) error {
	return s.write(volumeID, info, false)
}

// WriteDurable is Write for a record that must survive a power loss: the
// file is synced before the rename and the directory after it.
func (s *Store) WriteDurable(volumeID string, info *Info) error {
	return s.write(volumeID, info, true)
}

func (s *Store) write(volumeID string, info *Info, durable bool) error {
	path, err := s.Path(volumeID)
	if err != nil {
		return err
	}
	if info.StagingTargetPath == "" {
		return errors.New("tracking info without a staging path")
	}
	out := *info
	out.VolumeTrackingInfoPath = path
	if out.PublishedPaths == nil {
		// Trident writes {} rather than null.
		out.PublishedPaths = map[string]struct{}{}
	}
	data, err := json.Marshal(&out)
	if err != nil {
		return err
	}
	if cur, err := readFile(path); err == nil && bytes.Equal(cur, data) && !durable {
		return nil // a repeated call: the file already says this
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("tracking dir: %w", err)
	}
	// The temporary name does not end in .json: Trident scans the directory
	// for *.json on start-up and must not mistake a leftover for a volume.
	return atomicfile.Write(path, "."+volumeID+".tmp-*", data, 0o600, durable)
}

// Delete removes volumeID's tracking file; a missing file is not an error.
func (s *Store) Delete(volumeID string) error {
	path, err := s.Path(volumeID)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Others returns the state of every volume on the node but except, by
// volume id, for telling another volume's paths and mounts from this one's.
// Only the tracking files are read (not a legacy volumePublishInfo.json, so
// a staging path is never opened); a file that does not parse is skipped.
//
// Calls at the same time share a read of the files, one that started
// after each of them (sharedread): every unpublish and unstage reads every
// other volume's file, and twenty at once on the real kernel each spent
// 160–200 ms on it under the load they made together (issue 18). So the
// Infos are shared too: read them, never change them.
func (s *Store) Others(except string) (map[string]*Info, error) {
	all, err := s.records.Get()
	if err != nil {
		return nil, err
	}
	out := make(map[string]*Info, len(all))
	for id, info := range all {
		if id != except {
			out[id] = info
		}
	}
	return out, nil
}

// readAll reads every volume's tracking file (Others).
func (s *Store) readAll() (map[string]*Info, error) {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]*Info{}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !ValidVolumeID(id) || !e.Type().IsRegular() {
			continue
		}
		data, err := readFile(filepath.Join(s.dir, e.Name()))
		if err != nil {
			continue
		}
		if info, err := Decode(data); err == nil {
			out[id] = info
		}
	}
	return out, nil
}

// RemoveLegacy removes Trident's pre-23.01 publish info file from a staging
// path, if present. kubelet removes the staging directory after unstage and
// fails on a directory that is not empty.
func RemoveLegacy(stagingPath string) error {
	err := os.Remove(filepath.Join(stagingPath, LegacyPublishInfoFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Decode parses a tracking file in either layout. Legacy is set when the file
// holds nothing but the staging path (Trident before 23.01).
func Decode(data []byte) (*Info, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return nil, fmt.Errorf("not a tracking file: %w", err)
	}
	if keys == nil {
		return nil, errors.New("not a tracking file: null")
	}
	info := &Info{}
	if err := json.Unmarshal(data, info); err != nil {
		return nil, fmt.Errorf("not a tracking file: %w", err)
	}
	if info.StagingTargetPath == "" {
		return nil, errors.New("tracking file without stagingTargetPath")
	}
	info.Legacy = true
	for k := range keys {
		if k != "stagingTargetPath" {
			info.Legacy = false
			break
		}
	}
	return info, nil
}

// DecodePublishInfo parses Trident's legacy volumePublishInfo.json.
func DecodePublishInfo(data []byte) (*PublishInfo, error) {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return nil, errors.New("not a publish info file: null")
	}
	pi := &PublishInfo{}
	if err := json.Unmarshal(data, pi); err != nil {
		return nil, fmt.Errorf("not a publish info file: %w", err)
	}
	return pi, nil
}

// readFile reads a state file without following a symlink in its last
// component, and at most maxFileSize bytes of it.
func readFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxFileSize)
	}
	return data, nil
}
