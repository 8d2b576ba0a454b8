package iscsi

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/sirupsen/logrus"
)

// Resize makes the host see the LUN's new size: it rescans each path, waits
// until every path has at least minBytes (the size the controller grew the
// LUN to; 0 = do not wait), grows the multipath map to its paths' size, and
// returns the device's size in bytes. The filesystem is the caller's.
func (c *Client) Resize(ctx context.Context, t Target, minBytes int64) (int64, error) {
	t, err := t.normalized()
	if err != nil {
		return 0, err
	}
	paths, err := c.locate(ctx, t)
	if err != nil {
		return 0, err
	}
	if len(paths) == 0 {
		return 0, ErrNotAttached
	}
	for _, p := range paths {
		if err := c.writeAttr(filepath.Join(p.dev.dir, "rescan"), "1"); err != nil {
			return 0, fmt.Errorf("rescan %s: %w", p.dev.name, err)
		}
	}
	var pathSize int64
	for _, p := range paths {
		size, err := c.waitSize(ctx, p.dev.name, minBytes)
		if err != nil {
			return 0, fmt.Errorf("LUN %d of %s did not grow: %w", t.LUN, t.IQN, err)
		}
		pathSize = max(pathSize, size)
	}
	maps, err := c.pathMaps(paths)
	if err != nil {
		return 0, err
	}
	if len(maps) > 1 {
		return 0, fmt.Errorf("%w: paths of LUN %q are held by %d multipath maps", ErrSerialMismatch, t.Serial, len(maps))
	}
	if len(maps) == 1 {
		if _, err := c.verifyMap(maps[0], t.Serial); err != nil {
			return 0, err
		}
		if size, err := c.blockSize(maps[0].name); err != nil || size < pathSize {
			if _, err := c.resizeMap(ctx, maps[0], pathSize); err != nil {
				return 0, err
			}
		}
	}
	dev, err := c.device(t, paths)
	if err != nil {
		return 0, err
	}
	t.log(ctx).WithFields(logrus.Fields{"device": dev.Path, "size": dev.Size}).Info("rescanned iSCSI LUN")
	return dev.Size, nil
}
