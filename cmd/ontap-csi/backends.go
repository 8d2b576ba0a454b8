package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"text/tabwriter"
	"time"

	"github.com/ontap-csi/ontap-csi/controller/inventory"
)

func init() { subcommands["backends"] = runBackends }

// runBackends prints the state of every backend of the running controller,
// as its last check found it: `ontap-csi status` reads the node's plugin
// dir, so the controller's backends have a command of their own. It asks
// the controller's loopback REST server (--rest), so it runs in the
// controller's pod: kubectl exec deploy/<controller> -- /ontap-csi backends.
// The exit code is 1 when a backend is not online.
func runBackends(args []string) int {
	fs := flag.NewFlagSet("backends", flag.ContinueOnError)
	srv := fs.String("server", envOr("TRIDENT_SERVER", "127.0.0.1:8000"), "the controller's REST server (--address:--port); default $TRIDENT_SERVER")
	asJSON := fs.Bool("json", false, "print JSON")
	if code, done := parseSubcommand(fs, args); done {
		return code
	}
	l, err := getBackends(*srv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ontap-csi backends: %v\n", err)
		return 1
	}
	if !printResult("backends", *asJSON, l, func(w io.Writer) error { return writeBackends(w, l) }) {
		return 1
	}
	for _, b := range l.Backends {
		if b.State != inventory.Online {
			return 1
		}
	}
	return 0
}

func getBackends(server string) (*inventory.Listing, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+server+inventory.Path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the controller's REST server does not answer (run this in the controller's pod): %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", inventory.Path, resp.Status)
	}
	var l inventory.Listing
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, fmt.Errorf("GET %s: %w", inventory.Path, err)
	}
	return &l, nil
}

func writeBackends(w io.Writer, l *inventory.Listing) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDRIVER\tSTATE\tSVM\tMANAGEMENT LIF\tVOLUMES\tSNAPSHOTS\tCHECKED")
	for _, b := range l.Backends {
		checked := "-"
		if !b.CheckedAt.IsZero() {
			checked = b.CheckedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", b.Name, orDash(b.Driver), b.State, orDash(b.SVM),
			orDash(b.ManagementLIF), b.Volumes, b.Snapshots, checked)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, b := range l.Backends {
		if b.Message != "" {
			fmt.Fprintf(w, "\n%s: %s\n", b.State, b.Message)
		}
	}
	if len(l.Backends) == 0 {
		fmt.Fprintln(w, "\nno backends: give --backend-config files, or create TridentBackendConfigs (with --crd_persistence)")
	}
	return nil
}
