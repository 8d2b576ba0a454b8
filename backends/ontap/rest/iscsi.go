package rest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
)

// ISCSIService is the SVM's iSCSI target.
type ISCSIService struct {
	Enabled     bool
	TargetName  string // the target IQN
	TargetAlias string
}

// ISCSIService returns the SVM's iSCSI service. NotFound if the SVM has none.
func (c *Client) ISCSIService(ctx context.Context) (*ISCSIService, error) {
	svm, err := c.svm(ctx)
	if err != nil {
		return nil, err
	}
	var w struct {
		Enabled bool `json:"enabled"`
		Target  struct {
			Name  string `json:"name"`
			Alias string `json:"alias"`
		} `json:"target"`
	}
	if err := c.get(ctx, "/protocols/san/iscsi/services/{svm.uuid}", "/protocols/san/iscsi/services/"+url.PathEscape(svm),
		url.Values{"fields": {"enabled,target.name,target.alias"}}, &w); err != nil {
		return nil, err
	}
	return &ISCSIService{Enabled: w.Enabled, TargetName: w.Target.Name, TargetAlias: w.Target.Alias}, nil
}

// chapConfig is the SVM's default iSCSI authentication. ONTAP never returns the
// passwords.
type chapConfig struct {
	AuthenticationType string // chap, none or deny
	InboundUser        string
	OutboundUser       string
}

// CHAPCredentials are bidirectional CHAP settings. Printing them shows no
// secrets.
type CHAPCredentials struct {
	InboundUser      string
	InboundPassword  string
	OutboundUser     string
	OutboundPassword string
}

func (c CHAPCredentials) String() string {
	return fmt.Sprintf("rest.CHAPCredentials{InboundUser:%q InboundPassword:%s OutboundUser:%q OutboundPassword:%s}",
		c.InboundUser, redacted(c.InboundPassword != ""), c.OutboundUser, redacted(c.OutboundPassword != ""))
}

func (c CHAPCredentials) GoString() string     { return c.String() }
func (c CHAPCredentials) LogValue() slog.Value { return slog.StringValue(c.String()) }

const credentialsEndpoint = "/protocols/san/iscsi/credentials"

// chap returns the SVM's default initiator security settings.
func (c *Client) chap(ctx context.Context) (*chapConfig, error) {
	svm, err := c.svm(ctx)
	if err != nil {
		return nil, err
	}
	type wire struct {
		AuthenticationType string `json:"authentication_type"`
		CHAP               struct {
			Inbound struct {
				User string `json:"user"`
			} `json:"inbound"`
			Outbound struct {
				User string `json:"user"`
			} `json:"outbound"`
		} `json:"chap"`
	}
	recs, err := list[wire](ctx, c, credentialsEndpoint, credentialsEndpoint, url.Values{
		"svm.uuid": {svm}, "initiator": {"default"},
		"fields": {"initiator,authentication_type,chap.inbound.user,chap.outbound.user"},
	})
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, notFound(credentialsEndpoint, "iSCSI credential", "default")
	}
	w := recs[0]
	return &chapConfig{AuthenticationType: w.AuthenticationType, InboundUser: w.CHAP.Inbound.User, OutboundUser: w.CHAP.Outbound.User}, nil
}

// SetCHAP turns on bidirectional CHAP for the SVM's default initiator
// security (what Trident does with useCHAP).
func (c *Client) SetCHAP(ctx context.Context, creds CHAPCredentials) error {
	svm, err := c.svm(ctx)
	if err != nil {
		return err
	}
	const endpoint = credentialsEndpoint + "/{svm.uuid}/{initiator}"
	path := credentialsEndpoint + "/" + url.PathEscape(svm) + "/default"
	body := map[string]any{
		"authentication_type": "chap",
		"chap": map[string]any{
			"inbound":  map[string]string{"user": creds.InboundUser, "password": creds.InboundPassword},
			"outbound": map[string]string{"user": creds.OutboundUser, "password": creds.OutboundPassword},
		},
	}
	_, err = wasAmbiguous(c.mutate(ctx, http.MethodPatch, endpoint, path, nil, body, nil))
	return err
}
