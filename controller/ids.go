package controller

import (
	"encoding/base64"
	"strings"
)

// snapshotID is Trident's "<volumeID>/<snapshotName>" (storage.MakeSnapshotID).
func snapshotID(volumeID, snapshot string) string { return volumeID + "/" + snapshot }

// parseSnapshotID splits a snapshot ID. Snapshot names never hold a '/',
// volume IDs (PV names) normally do not either; the last '/' separates.
func parseSnapshotID(id string) (volumeID, snapshot string, ok bool) {
	i := strings.LastIndexByte(id, '/')
	if i <= 0 || i == len(id)-1 {
		return "", "", false
	}
	return id[:i], id[i+1:], true
}

// Pagination tokens name the first entry of the next page, so a page
// boundary survives entries being added or deleted between calls. They are
// opaque to the CO; a token we did not make is rejected (Aborted).
const tokenPrefix = "v1:"

func pageToken(nextID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(tokenPrefix + nextID))
}

func parsePageToken(tok string) (string, bool) {
	if tok == "" {
		return "", true
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return "", false
	}
	id, ok := strings.CutPrefix(string(b), tokenPrefix)
	return id, ok && id != ""
}

// page returns the entries of a list sorted by id that start at token, at
// most max of them (0: all), and the token of the next page.
func page[T any](sorted []T, id func(T) string, start string, max int) ([]T, string) {
	i := 0
	if start != "" {
		for i < len(sorted) && id(sorted[i]) < start {
			i++
		}
	}
	rest := sorted[i:]
	if max <= 0 || len(rest) <= max {
		return rest, ""
	}
	return rest[:max], pageToken(id(rest[max]))
}
