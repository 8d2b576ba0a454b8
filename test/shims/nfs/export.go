package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// export is the simulator's answer for an admitted client.
type export struct {
	Volume    string `json:"volume"`
	Directory string `json:"directory"`
	Access    string `json:"access"` // "rw" or "ro"
}

// mountNFS checks the export with the simulator and bind-mounts it.
func mountNFS(r *request) error {
	server, path, err := splitSource(r.source)
	if err != nil {
		return usagef("%v", err)
	}
	client := os.Getenv("NFS_SHIM_CLIENT_IP")
	if client == "" {
		return usagef("NFS_SHIM_CLIENT_IP is not set")
	}
	flags, err := mountFlags(r.options)
	if err != nil {
		return err
	}
	st, err := os.Stat(r.target)
	if err != nil || !st.IsDir() {
		return fmt.Errorf("mount point %s does not exist", r.target)
	}
	exp, err := lookupExport(server, client, path)
	if err != nil {
		return fmt.Errorf("mounting %s failed: %w", r.source, err)
	}
	if err := unix.Mount(exp.Directory, r.target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", exp.Directory, r.target, err)
	}
	if r.readOnly || exp.Access != "rw" {
		flags |= unix.MS_RDONLY
	}
	// A bind mount takes its flags on a remount.
	if flags != 0 {
		if err := unix.Mount("", r.target, "", unix.MS_REMOUNT|unix.MS_BIND|flags, ""); err != nil {
			_ = unix.Unmount(r.target, 0)
			return fmt.Errorf("mount options on %s: %w", r.target, err)
		}
	}
	return nil
}

// errAccessDenied words a 403 as mount.nfs does, which is what the node
// plugin maps to PermissionDenied.
var errAccessDenied = errors.New("access denied by server")

func lookupExport(server, client, path string) (*export, error) {
	base := os.Getenv("ONTAP_SIM_URL")
	if base == "" {
		return nil, usagef("ONTAP_SIM_URL is not set")
	}
	hc, err := httpClient()
	if err != nil {
		return nil, err
	}
	q := url.Values{"server": {server}, "client": {client}, "path": {path}}
	resp, err := hc.Get(strings.TrimSuffix(base, "/") + "/sim/nfs/export?" + q.Encode())
	if err != nil {
		return nil, fmt.Errorf("cannot reach the server: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var msg struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(body, &msg)
	switch resp.StatusCode {
	case http.StatusOK:
		exp := &export{}
		if err := json.Unmarshal(body, exp); err != nil || exp.Directory == "" {
			return nil, fmt.Errorf("undecodable simulator answer %q", body)
		}
		return exp, nil
	case http.StatusForbidden:
		return nil, fmt.Errorf("%w (%s)", errAccessDenied, msg.Error)
	case http.StatusNotFound:
		return nil, fmt.Errorf("reason given by server: No such file or directory (%s)", msg.Error)
	}
	return nil, fmt.Errorf("simulator answered %s: %s", resp.Status, msg.Error)
}

func httpClient() (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if ca := os.Getenv("ONTAP_SIM_CA"); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no certificate", ca)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}, nil
}
