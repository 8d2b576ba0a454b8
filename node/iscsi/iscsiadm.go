package iscsi

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/node/hostexec"
)

// iscsiadm exit codes (open-iscsi include/iscsi_err.h) that are answers
// rather than failures.
const (
	errSessExists      = 15 // ISCSI_ERR_SESS_EXISTS: already logged in
	errNoObjsFound     = 21 // ISCSI_ERR_NO_OBJS_FOUND: no session / no record
	errLoginAuthFailed = 24 // ISCSI_ERR_LOGIN_AUTH_FAILED
)

// sessions lists the iSCSI sessions of this host: from sysfs, which is
// all that `iscsiadm -m session` reads, and through iscsiadm only when
// sysfs does not say (sysfsSessions). A process per look cost more than
// the rest of a look; an attach and a detach look several times.
func (c *Client) sessions(ctx context.Context) ([]session, error) {
	if ss, ok := c.sysfsSessions(); ok {
		return ss, nil
	}
	out, err := c.run(ctx, "iscsiadm", "-m", "session")
	if hostexec.ExitCode(err) == errNoObjsFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list iSCSI sessions: %w", toolErr(err))
	}
	return parseSessions(out)
}

// targetSessions returns the sessions to t.IQN; with portals set, only those
// to one of them, in the order of portals.
func targetSessions(all []session, iqn string, portals []string) []session {
	var out []session
	if portals == nil {
		for _, s := range all {
			if strings.EqualFold(s.Target, iqn) {
				out = append(out, s)
			}
		}
		return out
	}
	for _, p := range portals {
		for _, s := range all {
			if strings.EqualFold(s.Target, iqn) && s.Portal == p {
				out = append(out, s)
			}
		}
	}
	return out
}

func nodeArgs(t Target, portal string) []string {
	return []string{"-m", "node", "-T", t.IQN, "-p", portal, "-I", t.Interface}
}

// login creates the node record of (target, portal), configures it and logs
// in. Every step is idempotent: "-o new" rewrites the record from defaults,
// each setting is written again, and a login to a portal that has a session
// already is a success (exit 15), so a call interrupted anywhere can be
// repeated.
func (c *Client) login(ctx context.Context, t Target, portal string, multipath bool) (err error) {
	log := t.log(ctx).WithField("portal", portal)
	base := nodeArgs(t, portal)
	defer func() {
		switch {
		case err == nil:
			loginsTotal.WithLabelValues("success").Inc()
		case errors.Is(err, ErrAuthFailed):
			loginsTotal.WithLabelValues("auth_failed").Inc()
		default:
			loginsTotal.WithLabelValues("error").Inc()
		}
	}()
	if _, err := c.run(ctx, "iscsiadm", append(base, "-o", "new")...); err != nil {
		return fmt.Errorf("create iSCSI node record for %s: %w", portal, toolErr(err))
	}
	settings := [][2]string{
		// Never let the kernel scan a whole session: a shared target shows
		// every LUN mapped to this node, and only the one being staged may
		// appear (Trident #410). Attach scans that LUN alone.
		{"node.session.scan", "manual"},
		// A login that fails fails in seconds, not minutes: by default
		// iscsid tries 8 times with 15 s each before iscsiadm returns, and
		// in the VM a login with a wrong CHAP secret outlasted the CO's
		// 3-minute deadline, holding iscsid's other requests behind it
		// (docs/vm.md, defect 13). Trident bounds it the same way (10 s,
		// one retry).
		{"node.conn[0].timeo.login_timeout", "10"},
		{"node.session.initial_login_retry_max", "1"},
	}
	if multipath {
		// With dm-multipath queueing above, a failed path should be given up
		// quickly so I/O moves to another path (NetApp's host settings).
		settings = append(settings, [2]string{"node.session.timeo.replacement_timeout", "5"})
	}
	if ch := t.CHAP; ch != nil {
		settings = append(settings,
			[2]string{"node.session.auth.authmethod", "CHAP"},
			[2]string{"node.session.auth.username", ch.Username},
			[2]string{"node.session.auth.password", ch.InitiatorSecret},
		)
		if ch.TargetUsername != "" {
			settings = append(settings,
				[2]string{"node.session.auth.username_in", ch.TargetUsername},
				[2]string{"node.session.auth.password_in", ch.TargetSecret},
			)
		}
	} else {
		settings = append(settings, [2]string{"node.session.auth.authmethod", "None"})
	}
	for _, kv := range settings {
		// Neither the error nor the log may show the value: CHAP secrets
		// reach iscsiadm only through argv.
		if _, err := c.run(hostexec.WithSensitiveArgs(ctx), "iscsiadm", append(base, "-o", "update", "-n", kv[0], "-v", kv[1])...); err != nil {
			return fmt.Errorf("set %s of iSCSI node %s: %w", kv[0], portal, toolErr(err))
		}
	}
	_, err = c.run(ctx, "iscsiadm", append(base, "-l")...)
	switch code := hostexec.ExitCode(err); {
	case err == nil:
		log.Info("logged in to iSCSI portal")
		return nil
	case code == errSessExists:
		return nil
	case code == errLoginAuthFailed:
		err = fmt.Errorf("%w (portal %s)", ErrAuthFailed, portal)
	default:
		err = fmt.Errorf("log in to iSCSI portal %s: %w", portal, toolErr(err))
	}
	// Leave no record (with secrets) behind for a portal we are not logged
	// in to; a retry creates it again.
	if derr := c.deleteRecord(ctx, t.IQN, portal); derr != nil {
		log.WithError(derr).Warn("could not delete the iSCSI node record after a failed login")
	}
	return err
}

// logout logs out of every session to (target, portal); "no session" (exit
// 21) is done already.
func (c *Client) logout(ctx context.Context, iqn, portal string) error {
	if _, err := c.run(ctx, "iscsiadm", "-m", "node", "-T", iqn, "-p", portal, "-u"); err != nil && hostexec.ExitCode(err) != errNoObjsFound {
		return fmt.Errorf("log out of iSCSI portal %s: %w", portal, toolErr(err))
	}
	logoutsTotal.Inc()
	logrus.WithContext(ctx).WithFields(logrus.Fields{"target": iqn, "portal": portal}).Info("logged out of iSCSI portal")
	return nil
}

// nodeRecords lists iscsiadm's node records.
func (c *Client) nodeRecords(ctx context.Context) ([]nodeRecord, error) {
	out, err := c.run(ctx, "iscsiadm", "-m", "node")
	if hostexec.ExitCode(err) == errNoObjsFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list iSCSI node records: %w", toolErr(err))
	}
	return parseNodeRecords(out)
}

// deleteRecord deletes the node records of (target, portal), so the host
// does not log in again at boot; "no record" (exit 21) is done already.
func (c *Client) deleteRecord(ctx context.Context, iqn, portal string) error {
	if _, err := c.run(ctx, "iscsiadm", "-m", "node", "-T", iqn, "-p", portal, "-o", "delete"); err != nil && hostexec.ExitCode(err) != errNoObjsFound {
		return fmt.Errorf("delete iSCSI node record %s: %w", portal, toolErr(err))
	}
	return nil
}

// toolErr keeps the tool's stderr but drops its argv (which may hold CHAP
// secrets) from anything that reaches a log or a gRPC status.
func toolErr(err error) error {
	var ee *hostexec.ExitError
	if errors.As(err, &ee) {
		return &hostexec.ExitError{Name: ee.Name, Code: ee.Code, Stderr: ee.Stderr}
	}
	return err
}
