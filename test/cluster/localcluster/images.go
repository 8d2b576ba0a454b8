package localcluster

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Image is a single-layer image on an empty base: a few static binaries and
// the directories they need. There is no registry and no container engine
// on the test machines, so images are written as docker-archive tarballs
// (what `docker save` produces) and imported into containerd with
// `ctr images import` (docs/design/local-cluster.md §3.4).
type Image struct {
	// Tags are full references, e.g. localhost/ontap-csi:e2e-a. One image
	// may carry several; the kubelet resolves each to the same content.
	Tags       []string
	Entrypoint []string
	Env        []string
	// Files maps a path in the image to a file on this machine.
	Files map[string]string
	// Dirs are created empty (mode 0755; /tmp gets 1777).
	Dirs []string
	// Links maps a path in the image to a symbolic link's target, as the
	// release image links /trident_orchestrator and /bin/tridentctl to
	// /ontap-csi (Dockerfile).
	Links map[string]string
}

// epoch is the timestamp of every entry, so that the same inputs always give
// the same image ID.
var epoch = time.Unix(0, 0).UTC()

// WriteArchive writes img as a docker-archive tarball to dst.
func (img Image) WriteArchive(dst string) error {
	layer, err := img.layer()
	if err != nil {
		return err
	}
	layerSum := sha256.Sum256(layer)
	diffID := "sha256:" + hex.EncodeToString(layerSum[:])

	env := img.Env
	if len(env) == 0 {
		env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	}
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config":       map[string]any{"Entrypoint": img.Entrypoint, "Env": env, "WorkingDir": "/"},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{diffID}},
		"history":      []map[string]string{{"created": epoch.Format(time.RFC3339), "created_by": "ontap-csi test/cluster"}},
	})
	if err != nil {
		return err
	}
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	layerName := hex.EncodeToString(layerSum[:]) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{
		"Config": configName, "RepoTags": img.Tags, "Layers": []string{layerName},
	}})
	if err != nil {
		return err
	}

	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		data []byte
	}{{configName, config}, {layerName, layer}, {"manifest.json", manifest}} {
		if dir := path.Dir(e.name); dir != "." {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, ModTime: epoch}); err != nil {
				f.Close()
				return err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: int64(len(e.data)), ModTime: epoch}); err != nil {
			f.Close()
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// layer returns the uncompressed layer tar: directories first (parents
// before children), then the files.
func (img Image) layer() ([]byte, error) {
	dirs := map[string]bool{}
	addParents := func(p string) {
		for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for _, d := range img.Dirs {
		d = path.Clean("/" + d)
		dirs[d] = true
		addParents(d)
	}
	files := make([]string, 0, len(img.Files))
	for p := range img.Files {
		files = append(files, p)
		addParents(path.Clean("/" + p))
	}
	links := make([]string, 0, len(img.Links))
	for p := range img.Links {
		links = append(links, p)
		addParents(path.Clean("/" + p))
	}
	sort.Strings(links)
	sort.Strings(files)
	dirList := make([]string, 0, len(dirs))
	for d := range dirs {
		dirList = append(dirList, d)
	}
	sort.Strings(dirList)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range dirList {
		mode := int64(0o755)
		if d == "/tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: mode, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	for _, p := range files {
		if err := addFile(tw, strings.TrimPrefix(path.Clean("/"+p), "/"), img.Files[p]); err != nil {
			return nil, err
		}
	}
	for _, p := range links {
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeSymlink, Name: strings.TrimPrefix(path.Clean("/"+p), "/"), Linkname: img.Links[p], Mode: 0o777, ModTime: epoch,
		}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func addFile(tw *tar.Writer, name, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", src)
	}
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg, Name: name, Mode: int64(st.Mode().Perm()), Size: st.Size(), ModTime: epoch,
	}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}
