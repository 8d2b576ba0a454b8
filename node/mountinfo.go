package node

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
	mount "k8s.io/mount-utils"
)

// mountsOf returns the entries of the mount table at mountInfo whose mount
// point is path exactly, bottom first.
//
// It parses only the lines that can be those entries (mountsIn). Before
// Linux 5.8 a read of mountinfo can miss lines while mounts change; there
// mount-utils reads the table until two reads agree, and parses it whole,
// as before.
func mountsOf(mountInfo, path string) ([]mount.MountInfo, error) {
	if tornMountinfo() {
		return mountsOfParsed(mountInfo, path)
	}
	data, err := os.ReadFile(mountInfo)
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	return mountsIn(data, path)
}

// mountsIn returns the entries of the mount table data whose mount point
// is path exactly, bottom first.
//
// It parses only the lines that can be those entries (they contain path):
// on a node with 500 mounts the kernel's table costs 0.47 ms to read and
// mount-utils' parse of every line another 0.45 ms, for the one or two
// lines a check needs (issue 18; an unpublish and an unstage check one
// path each). A line is parsed as mount-utils parses it
// (parseMountInfoLine).
func mountsIn(data []byte, path string) ([]mount.MountInfo, error) {
	var out []mount.MountInfo
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte{'\n'})
		if !bytes.Contains(line, []byte(path)) {
			continue // its mount point cannot be path
		}
		mi, err := parseMountInfoLine(string(line))
		if err != nil {
			return nil, fmt.Errorf("read mount table: %w", err)
		}
		if mi.MountPoint == path {
			out = append(out, mi)
		}
	}
	return out, nil
}

// mountsOfParsed is mountsOf through mount-utils' parse of the whole table.
func mountsOfParsed(mountInfo, path string) ([]mount.MountInfo, error) {
	infos, err := mount.ParseMountInfo(mountInfo)
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	var out []mount.MountInfo
	for _, mi := range infos {
		if mi.MountPoint == path {
			out = append(out, mi)
		}
	}
	return out, nil
}

// parseMountInfoLine parses one line of mountinfo (proc(5)) into what
// mount-utils' ParseMountInfo makes of it, field for field.
func parseMountInfoLine(line string) (mount.MountInfo, error) {
	fields := strings.Fields(line)
	if len(fields) < 10 {
		return mount.MountInfo{}, fmt.Errorf("wrong number of fields in (expected at least 10, got %d): %s", len(fields), line)
	}
	id, err := strconv.Atoi(fields[0])
	if err != nil {
		return mount.MountInfo{}, err
	}
	parentID, err := strconv.Atoi(fields[1])
	if err != nil {
		return mount.MountInfo{}, err
	}
	mm := strings.Split(fields[2], ":")
	if len(mm) != 2 {
		return mount.MountInfo{}, fmt.Errorf("parsing '%s' failed: unexpected minor:major pair %s", line, mm)
	}
	major, err := strconv.Atoi(mm[0])
	if err != nil {
		return mount.MountInfo{}, fmt.Errorf("parsing '%s' failed: unable to parse major device id, err:%v", mm[0], err)
	}
	minor, err := strconv.Atoi(mm[1])
	if err != nil {
		return mount.MountInfo{}, fmt.Errorf("parsing '%s' failed: unable to parse minor device id, err:%v", mm[1], err)
	}
	mi := mount.MountInfo{
		ID: id, ParentID: parentID, Major: major, Minor: minor,
		Root: fields[3], MountPoint: fields[4], MountOptions: splitMountOptions(fields[5]),
	}
	i := 6
	for ; i < len(fields) && fields[i] != "-"; i++ {
		mi.OptionalFields = append(mi.OptionalFields, fields[i])
	}
	i++
	if len(fields)-i < 3 {
		return mount.MountInfo{}, fmt.Errorf("expect 3 fields in %s, got %d", line, len(fields)-i)
	}
	mi.FsType, mi.Source, mi.SuperOptions = fields[i], fields[i+1], splitMountOptions(fields[i+2])
	return mi, nil
}

// splitMountOptions splits a comma-separated option list; a comma inside
// double quotes does not separate (mount-utils' rule).
func splitMountOptions(s string) []string {
	inQuotes := false
	return strings.FieldsFunc(s, func(r rune) bool {
		if r == '"' {
			inQuotes = !inQuotes
		}
		return r == ',' && !inQuotes
	})
}

var (
	tornOnce sync.Once
	torn     bool
)

// tornMountinfo reports a kernel before 5.8, whose mountinfo reads can
// miss lines while mounts change (fixed by kernel commit 9f6c61f96f2d97;
// mount-utils tells it by the release the same way).
func tornMountinfo() bool {
	tornOnce.Do(func() {
		var u unix.Utsname
		if unix.Uname(&u) != nil {
			torn = true
			return
		}
		torn = releaseBefore58(unix.ByteSliceToString(u.Release[:]))
	})
	return torn
}

// releaseBefore58 reports whether a kernel release ("6.1.0-18-amd64") is
// before 5.8; one it cannot read counts as before.
func releaseBefore58(release string) bool {
	v := strings.SplitN(release, ".", 3)
	if len(v) != 3 {
		return true
	}
	major, err1 := strconv.Atoi(v[0])
	minor, err2 := strconv.Atoi(v[1])
	if err1 != nil || err2 != nil {
		return true
	}
	return major < 5 || major == 5 && minor < 8
}
