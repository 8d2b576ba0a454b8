package iscsi

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// InitiatorNameFile is where open-iscsi keeps the node's IQN, relative to
// the host root.
const InitiatorNameFile = "/etc/iscsi/initiatorname.iscsi"

// ErrNoInitiatorName means the file holds no InitiatorName= line: open-iscsi
// is installed but not configured (the IQN is generated on first start of
// iscsid on most distributions).
var ErrNoInitiatorName = errors.New("no InitiatorName in initiatorname.iscsi")

// maxInitiatorFile bounds what ReadInitiatorName reads; the real file is a
// few lines.
const maxInitiatorFile = 64 << 10

// ParseInitiatorName returns the value of the first InitiatorName= line of
// an initiatorname.iscsi file, as iscsid and Trident read it. Comment lines
// start with '#'; surrounding blanks are ignored.
func ParseInitiatorName(content []byte) (string, error) {
	sc := bufio.NewScanner(bytes.NewReader(content))
	sc.Buffer(make([]byte, 0, 1024), maxInitiatorFile)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			continue
		}
		v, ok := strings.CutPrefix(line, "InitiatorName=")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if err := validateIQN(v); err != nil {
			return "", fmt.Errorf("initiatorname.iscsi: %w", err)
		}
		return v, nil
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("initiatorname.iscsi: %w", err)
	}
	return "", ErrNoInitiatorName
}

// ReadInitiatorName reads and parses an initiatorname.iscsi file, e.g.
// filepath.Join(hostRoot, InitiatorNameFile).
func ReadInitiatorName(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxInitiatorFile+1))
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > maxInitiatorFile {
		return "", fmt.Errorf("%s: larger than %d bytes", path, maxInitiatorFile)
	}
	name, err := ParseInitiatorName(data)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return name, nil
}
