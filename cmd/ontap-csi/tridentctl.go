package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/ontap-csi/ontap-csi/controller/tridentrest"
)

// tridentctlName is the name under which the binary acts as Trident's CLI:
// the image links /bin/tridentctl to it.
const tridentctlName = "tridentctl"

// tridentctlMain implements the part of Trident's tridentctl that
// trident-operator runs inside the image:
//   - `tridentctl -s 127.0.0.1:8000 version [-o json]`, the controller
//     Deployment's liveness and readiness probes and the operator's wait for
//     the REST interface;
//   - `tridentctl version --client -o yaml`, the operator's check that an
//     image is of its own release;
//   - `tridentctl pause`, the command of the operator's transient version pod.
//
// Anything else fails and says so.
func tridentctlMain(args []string, stdout, stderr io.Writer) int {
	cl, err := parseTridentctl(args)
	if err == nil && len(cl.extra) > 0 && (cl.command == "version" || cl.command == "pause") {
		err = fmt.Errorf("unexpected argument %q", cl.extra[0])
	}
	if err == nil {
		switch cl.command {
		case "version":
			err = cl.version(stdout)
		case "pause":
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			<-ctx.Done()
		case "":
			err = errors.New("no command given (ontap-csi's tridentctl implements version and pause)")
		default:
			err = fmt.Errorf("%q is not implemented by ontap-csi's tridentctl, which implements only version and pause, the commands trident-operator runs", cl.command)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 1
	}
	return 0
}

type tridentctl struct {
	command    string
	server     string // -s, --server; default $TRIDENT_SERVER
	output     string // -o, --output: "", json, yaml, wide
	clientOnly bool   // version --client
	extra      []string
}

// parseTridentctl reads cobra-style flags: -s x, -s=x, --server x,
// --server=x, anywhere on the line.
func parseTridentctl(args []string) (*tridentctl, error) {
	cl := &tridentctl{server: os.Getenv("TRIDENT_SERVER")}
	withValue := map[string]*string{"-s": &cl.server, "--server": &cl.server, "-o": &cl.output, "--output": &cl.output, "-n": new(string), "--namespace": new(string)}
	boolean := map[string]*bool{"--client": &cl.clientOnly, "-d": new(bool), "--debug": new(bool)}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			if cl.command == "" {
				cl.command = a
			} else {
				cl.extra = append(cl.extra, a)
			}
			continue
		}
		name, value, hasValue := strings.Cut(a, "=")
		if p, ok := withValue[name]; ok {
			if !hasValue {
				if i+1 >= len(args) {
					return nil, fmt.Errorf("flag needs an argument: %s", name)
				}
				i++
				value = args[i]
			}
			*p = value
			continue
		}
		if p, ok := boolean[name]; ok {
			b := true
			if hasValue {
				var err error
				if b, err = strconv.ParseBool(value); err != nil {
					return nil, fmt.Errorf("invalid argument %q for %s", value, name)
				}
			}
			*p = b
			continue
		}
		return nil, fmt.Errorf("unknown flag: %s", name)
	}
	switch cl.output {
	case "", "json", "yaml", "wide":
	default:
		return nil, fmt.Errorf("unsupported output format %q (json, yaml, wide)", cl.output)
	}
	return cl, nil
}

// cliVersion is Trident's version record (cli/api Version).
type cliVersion struct {
	Version       string `json:"version"`
	MajorVersion  uint   `json:"majorVersion"`
	MinorVersion  uint   `json:"minorVersion"`
	PatchVersion  uint   `json:"patchVersion"`
	PreRelease    string `json:"preRelease"`
	BuildMetadata string `json:"buildMetadata"`
	APIVersion    string `json:"apiVersion"`
	GoVersion     string `json:"goVersion"`
}

var versionRE = regexp.MustCompile(`^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+([0-9A-Za-z.-]+))?$`)

func newCLIVersion(v, goVersion string) *cliVersion {
	out := &cliVersion{Version: v, APIVersion: "1", GoVersion: goVersion}
	if m := versionRE.FindStringSubmatch(v); m != nil {
		n := func(s string) uint { x, _ := strconv.ParseUint(s, 10, 32); return uint(x) }
		out.MajorVersion, out.MinorVersion, out.PatchVersion = n(m[1]), n(m[2]), n(m[3])
		out.PreRelease, out.BuildMetadata = m[4], m[5]
	}
	return out
}

func (cl *tridentctl) version(w io.Writer) error {
	client := newCLIVersion(reportedVersion(), runtime.Version())
	if cl.clientOnly {
		return cl.print(w, map[string]any{"client": client}, []string{"CLIENT VERSION"}, []string{client.Version})
	}
	if cl.server == "" {
		return errors.New("no server: give -s <host:port> or set TRIDENT_SERVER (ontap-csi's tridentctl does not reach the controller through kubectl)")
	}
	srv, err := getServerVersion(cl.server)
	if err != nil {
		return err
	}
	resp := map[string]any{"server": srv, "client": client}
	if cl.output == "wide" {
		return cl.print(w, resp, []string{"SERVER VERSION", "SERVER GO VERSION", "CLIENT VERSION", "CLIENT GO VERSION"},
			[]string{srv.Version, srv.GoVersion, client.Version, client.GoVersion})
	}
	return cl.print(w, resp, []string{"SERVER VERSION", "CLIENT VERSION"}, []string{srv.Version, client.Version})
}

func getServerVersion(server string) (*cliVersion, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+server+tridentrest.BaseURL+"/version", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("could not get version: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("could not get version: %w", err)
	}
	var v tridentrest.VersionResponse
	if jerr := json.Unmarshal(body, &v); resp.StatusCode != http.StatusOK || jerr != nil || v.Version == "" {
		msg := v.Error
		if msg == "" {
			msg = strings.TrimSpace(string(body))
		}
		return nil, fmt.Errorf("could not get version: %s: %s", resp.Status, msg)
	}
	return newCLIVersion(v.Version, v.GoVersion), nil
}

func (cl *tridentctl) print(w io.Writer, v any, header, row []string) error {
	switch cl.output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		data, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	fmt.Fprintln(tw, strings.Join(row, "\t"))
	return tw.Flush()
}
