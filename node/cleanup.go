package node

import (
	"context"
	"fmt"
	"slices"

	"github.com/sirupsen/logrus"
)

// Attachments tells which volumes the control plane still has attached to
// this node: the volume IDs of every VolumeAttachment of this driver for
// this node (node/kubenode reads them).
type Attachments interface {
	AttachedVolumes(ctx context.Context, nodeID string) (map[string]bool, error)
}

// CleanStale removes, before the plugin registers with kubelet, what a
// node that was fenced while it was away still has of volumes that are no
// longer attached to it (docs/design/fencing.md §4): the volume's published
// targets are unpublished and its staging path unstaged, as kubelet's own
// calls would, under the volume's lock. Those calls already refuse to
// touch what is not provably this volume's (ownership.go), release a
// multipath map whose every path is gone without queueing writes to it
// before the unmount, and log out of the LUN's session.
//
// It is conservative: a volume with any VolumeAttachment for this node,
// attached or not, is left alone; if the attachments cannot be read,
// nothing is cleaned. It returns the volumes it cleaned; a volume whose
// cleanup fails is logged and left for kubelet, the others are still
// cleaned.
func (s *Service) CleanStale(ctx context.Context, a Attachments) ([]string, error) {
	records, err := s.state.Others("")
	if err != nil {
		return nil, fmt.Errorf("reading the node's tracking files: %w", err)
	}
	if len(records) == 0 {
		return nil, nil
	}
	attached, err := a.AttachedVolumes(ctx, s.cfg.NodeID)
	if err != nil {
		return nil, fmt.Errorf("reading the VolumeAttachments of node %s: %w", s.cfg.NodeID, err)
	}
	var cleaned []string
	ids := make([]string, 0, len(records))
	for id := range records {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if attached[id] {
			continue
		}
		log := logrus.WithContext(ctx).WithField("volume", id)
		if err := s.cleanVolume(ctx, id); err != nil {
			log.WithError(err).Warn("stale volume not cleaned: it is no longer attached to this node; kubelet's unpublish and unstage are left to finish it")
			continue
		}
		log.Info("stale volume cleaned: it is no longer attached to this node (fenced or force-detached while the plugin was away)")
		cleaned = append(cleaned, id)
	}
	return cleaned, nil
}

// cleanVolume unpublishes every recorded target of volumeID, then unstages
// it, under its lock; the record is read again under the lock.
func (s *Service) cleanVolume(ctx context.Context, volumeID string) error {
	unlock, err := s.lock(ctx, volumeID)
	if err != nil {
		return err
	}
	defer unlock()
	info, err := s.readState(ctx, volumeID)
	if err != nil || info == nil {
		return err
	}
	targets := make([]string, 0, len(info.PublishedPaths))
	for t := range info.PublishedPaths {
		targets = append(targets, t)
	}
	slices.Sort(targets)
	for _, t := range targets {
		p, err := s.confine(t, "recorded target path")
		if err != nil {
			return err
		}
		if err := s.unpublish(ctx, volumeID, p); err != nil {
			return fmt.Errorf("unpublish %s: %w", t, err)
		}
	}
	if info.StagingTargetPath == "" {
		return nil
	}
	p, err := s.confine(info.StagingTargetPath, "recorded staging path")
	if err != nil {
		return err
	}
	if err := s.unstage(ctx, volumeID, p); err != nil {
		return fmt.Errorf("unstage %s: %w", info.StagingTargetPath, err)
	}
	return nil
}
