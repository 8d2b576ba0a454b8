// Package atomicfile replaces a file so that its readers see the old or the
// new content, never a torn one, and a watcher sees one Create: the content
// goes to a temporary file in the same directory, which is renamed over the
// file. The node's tracking files and the registration lease are written so.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces path with data, with mode perm. tempPattern names the
// temporary file (os.CreateTemp's pattern) in path's directory: each caller
// picks one that its directory's readers skip. With durable, the file is
// synced before the rename and the directory after it, so that the new
// content survives a power loss; without, a crash may leave the old content
// or none, never a mix.
func Write(path, tempPattern string, data []byte, perm os.FileMode, durable bool) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tempPattern)
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if durable {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if !durable {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
