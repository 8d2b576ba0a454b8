// Package ontap holds the ontap-nas and ontap-san drivers: the
// backends.Backend of a Trident backend config (package config) over the
// ONTAP REST API (package rest).
package ontap

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
	"github.com/ontap-csi/ontap-csi/internal/keymutex"
)

// Options tune a driver beyond its Trident backend configuration.
type Options struct {
	// InstallationID is the "<uuid>" of per-node igroups "<node>-<uuid>".
	// Empty derives it from the SVM's UUID, so every controller of every
	// installation that uses the SVM agrees on it without stored state.
	// Set it to the Trident UUID (TridentVersion) to take over the
	// igroups of a Trident installation.
	InstallationID string
	// Client adjusts the REST client settings (e.g. shorter retry delays
	// in tests).
	Client func(*rest.ClientConfig)
}

// NewBackend returns the ontap-nas or ontap-san driver of a parsed backend
// configuration. It does not contact ONTAP: the first call that needs ONTAP
// connects, and a failed connection is retried by the next call, so an
// unreachable ONTAP never stops the plugin from starting.
func NewBackend(cfg *config.Backend, opts Options) (backends.Backend, error) {
	cc := clientConfig(cfg)
	if opts.Client != nil {
		opts.Client(&cc)
	}
	client, err := rest.NewClient(cc)
	if err != nil {
		return nil, fmt.Errorf("backend %s (%s): %w", cfg.BackendName, cfg.Source, err)
	}
	d := &driver{cfg: cfg, client: client, opts: opts}
	switch cfg.StorageDriverName {
	case config.DriverONTAPNAS:
		n := &nasDriver{driver: d}
		d.initProtocol = n.init
		return n, nil
	case config.DriverONTAPSAN:
		s := &sanDriver{driver: d}
		d.initProtocol, d.lunSizes = s.init, s.readLUNSizes
		return s, nil
	case config.DriverONTAPNASEconomy:
		return newNASEconomy(d), nil
	case config.DriverONTAPSANEconomy:
		return newSANEconomy(d), nil
	}
	return nil, fmt.Errorf("backend %s (%s): storage driver %q is not supported", cfg.BackendName, cfg.Source, cfg.StorageDriverName)
}

// clientConfig returns the REST client settings of a backend.
func clientConfig(c *config.Backend) rest.ClientConfig {
	return rest.ClientConfig{
		ManagementLIF:         c.ManagementLIF,
		SVM:                   c.SVM,
		Username:              c.Username,
		Password:              string(c.Password),
		ClientCertificate:     c.ClientCertificate,
		ClientPrivateKey:      []byte(c.ClientPrivateKey),
		TrustedCACertificate:  c.TrustedCACertificate,
		InsecureSkipTLSVerify: c.InsecureSkipTLSVerify,
	}
}

// driver is what ontap-nas and ontap-san share.
type driver struct {
	cfg    *config.Backend
	client *rest.Client
	opts   Options

	initProtocol func(context.Context) error
	// lunSizes reads the size of the LUN in each FlexVol, by FlexVol name:
	// the size of an ontap-san volume that records none. nil for ontap-nas.
	lunSizes func(context.Context) (map[string]int64, error)

	initMu sync.Mutex
	// Set once ONTAP answered; derived from the SVM, never from volumes.
	svm            *rest.SVM
	pools          []backends.Pool
	installationID string
	backendUUID    string
	// largeVolumes: the cluster runs ONTAP 9.12.1 or later (sizes.go).
	largeVolumes bool
	ontapVersion string

	// igroupLocks serializes the reading or making of an igroup not
	// remembered (ensureIgroup) and the unpublishes that read an igroup's
	// maps before they delete it (unmap, deleteIgroupIfUnmapped). A
	// publish's map and the unpublish of a remembered LUN (unmapKnown) do
	// without: ONTAP refuses to delete a mapped igroup, and a publish
	// makes a vanished igroup again (san_publish.go).
	igroupLocks keymutex.Mutex

	// ids remembers volumes for publish, unpublish and delete
	// (identities.go).
	ids identities
}

func (d *driver) Name() string { return d.cfg.BackendName }

// Close implements io.Closer: it releases the idle connections to ONTAP of
// a backend that is replaced or removed. Calls in flight finish, and a call
// made later still works, on a new connection.
func (d *driver) Close() error {
	d.client.Close()
	return nil
}

func (d *driver) Driver() string { return d.cfg.StorageDriverName }

// Describe implements backends.Describer; the UUID is known once ONTAP
// answered.
func (d *driver) Describe() backends.Description {
	d.initMu.Lock()
	defer d.initMu.Unlock()
	return backends.Description{UUID: d.backendUUID, SVM: d.cfg.SVM, ManagementLIF: d.cfg.ManagementLIF}
}

// MinimumVolumeSize is ONTAP's (and Trident's) smallest FlexVol.
const MinimumVolumeSize = 20 << 20

func (d *driver) Limits() backends.Limits {
	return backends.Limits{
		MinVolumeSize:     MinimumVolumeSize,
		MaxVolumeSize:     d.cfg.LimitVolumeSize,
		DefaultVolumeSize: d.cfg.Defaults.Size,
	}
}

// ready connects to ONTAP once. Its failures are what any call may meet
// while ONTAP cannot be used, so they name the backend (once: see
// backends.Named).
func (d *driver) ready(ctx context.Context) error {
	d.initMu.Lock()
	defer d.initMu.Unlock()
	if d.svm != nil {
		return nil
	}
	return backends.Named(d.Name(), d.connect(ctx))
}

// connect finds the SVM, derives the identifiers and pools, and lets the
// protocol check its service. Called with initMu held.
func (d *driver) connect(ctx context.Context) error {
	svm, err := d.client.SVM(ctx)
	if err != nil {
		return d.unreachable(err)
	}
	if svm.State != "" && svm.State != "running" {
		return backends.Errorf(backends.ErrUnavailable, "SVM %s is %s", svm.Name, svm.State)
	}
	if a := d.cfg.Aggregate; a != "" && !slices.ContainsFunc(svm.Aggregates, func(x rest.SVMAggregate) bool { return x.Name == a }) {
		return backends.Errorf(backends.ErrUnavailable, "aggregate %s is not assigned to SVM %s", a, svm.Name)
	}
	if err := d.checkBalancedPlacement(ctx); err != nil {
		return err
	}
	// Before the protocol's start: ontap-san reads the LUN IDs of the
	// per-node igroups there (sanDriver.seedLUNIDs).
	d.installationID = d.opts.InstallationID
	if d.installationID == "" {
		d.installationID = nameUUID("ontap-csi:igroups:" + svm.UUID)
	}
	if d.initProtocol != nil {
		if err := d.initProtocol(ctx); err != nil {
			return err
		}
	}
	d.backendUUID = nameUUID("ontap-csi:backend:" + svm.UUID + ":" + d.cfg.BackendName)
	large, version, err := d.client.LargeVolumes(ctx)
	if err != nil {
		// Only sizes over 100 TiB depend on it: without the version they
		// are refused, everything else works.
		logrus.WithContext(ctx).WithField("backend", d.Name()).WithError(err).Warn("cannot read the ONTAP version; volumes over 100 TiB are refused")
		version = "an unknown version"
	}
	d.largeVolumes, d.ontapVersion = large, version
	d.pools = d.buildPools(svm)
	d.svm = svm
	logrus.WithContext(ctx).WithFields(logrus.Fields{
		"backend": d.Name(), "svm": svm.Name, "svmUUID": svm.UUID, "pools": len(d.pools),
	}).Info("ONTAP backend connected")
	return nil
}

// unreachable explains a failed first contact with ONTAP. An untrusted
// certificate gets both fixes: Trident never verified ONTAP's certificate,
// so a backend carried over from Trident often has no trustedCACertificate.
func (d *driver) unreachable(err error) error {
	cert := rest.CertificateError(err)
	if cert == nil {
		return backends.Errorf(backends.ErrUnavailable, "cannot reach SVM %s: %w", d.cfg.SVM, err)
	}
	lif := d.cfg.ManagementLIF
	what := "is not trusted"
	if len(d.cfg.TrustedCACertificate) > 0 {
		what = "does not verify against trustedCACertificate"
	}
	return backends.Errorf(backends.ErrUnavailable, "the TLS certificate ONTAP presents at %s %s (%w); "+
		"set trustedCACertificate to the base64 PEM of the CA that signed it (`ontap-csi certificate %s` prints it), "+
		"or set insecureSkipTLSVerify: true for a first test only", lif, what, cert, lif)
}

// checkBalancedPlacement refuses a backend whose pools ask for balanced
// placement on an ONTAP that cannot do it, as Trident does at start.
func (d *driver) checkBalancedPlacement(ctx context.Context) error {
	if !d.usesBalancedPlacement() {
		return nil
	}
	ok, release, err := d.client.SupportsBalancedPlacement(ctx)
	if err != nil {
		return backends.Errorf(backends.ErrUnavailable, "reading the ONTAP version: %w", err)
	}
	if !ok {
		return backends.Errorf(backends.ErrUnavailable, "useBalancedPlacement needs ONTAP 9.19.1 or later; the cluster runs %s", release)
	}
	return nil
}

func (d *driver) protocol() backends.Protocol {
	if d.cfg.IsSAN() {
		return backends.ProtocolBlock
	}
	return backends.ProtocolFile
}

// Protocol implements backends.Backend.
func (d *driver) Protocol() backends.Protocol { return d.protocol() }
