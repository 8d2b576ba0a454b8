package ontapsim

import (
	"strings"
)

var iscsiServiceResource = &resource{
	schema:  newSchema(`svm.name svm.uuid enabled target.name target.alias _links`),
	keys:    []string{"svm.name", "svm.uuid"},
	sortKey: "svm.uuid",
}

var credentialResource = &resource{
	schema: newSchema(`svm.name svm.uuid initiator authentication_type chap.inbound.user chap.outbound.user
		initiator_address.ranges _links`),
	keys:    []string{"svm.name", "svm.uuid", "initiator"},
	sortKey: "initiator",
}

var (
	iscsiServicePatchFields = newSchema(`enabled target.alias`)
	credentialPatchFields   = newSchema(`authentication_type chap.inbound.user chap.inbound.password
		chap.outbound.user chap.outbound.password`)
	credentialPostFields = newSchema(`svm.name svm.uuid initiator authentication_type chap.inbound.user
		chap.inbound.password chap.outbound.user chap.outbound.password`)
)

func (s *Simulator) renderISCSIService(svm *svmState) map[string]any {
	return map[string]any{
		"svm":     map[string]any{"name": svm.Name, "uuid": svm.UUID},
		"enabled": svm.ISCSI,
		"target":  map[string]any{"name": svm.TargetIQN, "alias": svm.Name},
		"_links":  selfLink("/api/protocols/san/iscsi/services/" + svm.UUID),
	}
}

func (s *Simulator) getISCSIServices(c *call) (*reply, *apiError) {
	var recs []map[string]any
	for _, svm := range s.m.SVMs {
		recs = append(recs, s.renderISCSIService(svm))
	}
	return c.list(iscsiServiceResource, recs)
}

func (c *call) iscsiService() (*svmState, *apiError) {
	svm := c.m.svm(c.params["svm.uuid"])
	if svm == nil {
		return nil, errNotFound(codeISCSINoService, "svm.uuid", "The SVM has no iSCSI service.")
	}
	return svm, nil
}

func (s *Simulator) getISCSIService(c *call) (*reply, *apiError) {
	svm, err := c.iscsiService()
	if err != nil {
		return nil, err
	}
	return c.instance(iscsiServiceResource, s.renderISCSIService(svm))
}

// patchISCSIService can disable the service (tests of "no active iSCSI").
func (s *Simulator) patchISCSIService(c *call) (*reply, *apiError) {
	svm, err := c.iscsiService()
	if err != nil {
		return nil, err
	}
	if err := c.patchBody(iscsiServicePatchFields, iscsiServiceResource); err != nil {
		return nil, err
	}
	if _, ok := c.body.str("target.alias"); ok {
		return nil, errInvalid(codeCannotSetField, "target.alias", "The target alias cannot be changed in the simulator.")
	}
	enabled, ok := c.body.boolean("enabled")
	if c.body.err != nil {
		return nil, c.body.err
	}
	if ok {
		svm.ISCSI = enabled
	}
	return okReply(), nil
}

// ---- CHAP credentials ----

func (s *Simulator) renderCredential(cr *chapState) map[string]any {
	rec := map[string]any{
		"initiator":           cr.Initiator,
		"authentication_type": cr.AuthType,
		"_links":              selfLink("/api/protocols/san/iscsi/credentials/" + cr.SVM + "/" + cr.Initiator),
	}
	if svm := s.m.svm(cr.SVM); svm != nil {
		rec["svm"] = map[string]any{"name": svm.Name, "uuid": svm.UUID}
	}
	// Passwords are write-only (docs/design/ontap-rest.md §3.11).
	if cr.AuthType == "chap" {
		chap := map[string]any{"inbound": map[string]any{"user": cr.InboundUser}}
		if cr.OutboundUser != "" {
			chap["outbound"] = map[string]any{"user": cr.OutboundUser}
		}
		rec["chap"] = chap
	}
	return rec
}

func (s *Simulator) getCredentials(c *call) (*reply, *apiError) {
	var recs []map[string]any
	for _, cr := range s.m.Credentials {
		recs = append(recs, s.renderCredential(cr))
	}
	return c.list(credentialResource, recs)
}

func (c *call) credential() (*chapState, *apiError) {
	cr := c.m.credential(c.params["svm.uuid"], c.params["initiator"])
	if cr == nil {
		return nil, errNotFound(codeChapNotFound, "initiator", "The iSCSI credential for initiator %q does not exist.", c.params["initiator"])
	}
	return cr, nil
}

func (s *Simulator) getCredential(c *call) (*reply, *apiError) {
	cr, err := c.credential()
	if err != nil {
		return nil, err
	}
	return c.instance(credentialResource, s.renderCredential(cr))
}

// applyCredential validates a credential body against the resulting state
// and applies it to cr (a copy on POST).
func applyCredential(b *bodyReader, cr *chapState) *apiError {
	typ, hasType := b.enum("authentication_type", "chap", "none", "deny")
	inUser, hasInUser := b.str("chap.inbound.user")
	inPass, hasInPass := b.str("chap.inbound.password")
	outUser, hasOutUser := b.str("chap.outbound.user")
	outPass, hasOutPass := b.str("chap.outbound.password")
	if b.err != nil {
		return b.err
	}
	if !hasType {
		typ = cr.AuthType
	}
	anyChap := hasInUser || hasInPass || hasOutUser || hasOutPass
	if typ != "chap" {
		if anyChap {
			return errInvalid(codeChapWithNone, "chap", "CHAP properties cannot be set with authentication type %q.", typ)
		}
		*cr = chapState{SVM: cr.SVM, Initiator: cr.Initiator, AuthType: typ}
		return nil
	}
	next := *cr
	next.AuthType = "chap"
	if hasInUser {
		next.InboundUser = inUser
	}
	if hasInPass {
		next.InboundPass = inPass
	}
	if hasOutUser {
		next.OutboundUser = outUser
		if !hasOutPass && outUser != cr.OutboundUser {
			next.OutboundPass = ""
		}
	}
	if hasOutPass {
		next.OutboundPass = outPass
	}
	for _, u := range []string{next.InboundUser, next.OutboundUser} {
		if len(u) > 128 {
			return errInvalid(codeInvalidValue, "chap", "CHAP user names are limited to 128 characters.")
		}
	}
	for _, p := range []string{next.InboundPass, next.OutboundPass} {
		if len(p) > 512 {
			return errInvalid(codeInvalidValue, "chap", "CHAP passwords are limited to 512 characters.")
		}
		if h, ok := strings.CutPrefix(strings.ToLower(p), "0x"); ok && len(h)%2 != 0 {
			return errInvalid(codeChapHexOdd, "chap", "A hexadecimal CHAP password must have an even number of digits.")
		}
	}
	switch {
	case next.InboundUser == "" || next.InboundPass == "":
		return errInvalid(codeChapInboundRequired, "chap.inbound", "Inbound user and password are required for CHAP authentication.")
	case next.OutboundUser != "" && next.OutboundPass == "":
		return errInvalid(codeChapOutboundPass, "chap.outbound.password", "An outbound CHAP user needs a password.")
	case next.OutboundPass != "" && next.OutboundPass == next.InboundPass:
		return errInvalid(codeChapPasswordsEqual, "chap.outbound.password", "The inbound and outbound CHAP passwords must differ.")
	}
	*cr = next
	return nil
}

func (s *Simulator) postCredential(c *call) (*reply, *apiError) {
	if err := c.checkBody(credentialPostFields, credentialResource); err != nil {
		return nil, err
	}
	svm, err := c.resolveSVM(c.body, true)
	if err != nil {
		return nil, err
	}
	init, _ := c.body.str("initiator")
	if c.body.err != nil {
		return nil, c.body.err
	}
	if init == "" {
		return nil, errInvalid(codeMissingRequired, "initiator", "Request missing required value \"initiator\".")
	}
	if init != "default" {
		if err := validateInitiator(init, "iscsi"); err != nil {
			return nil, err
		}
	}
	if s.m.credential(svm.UUID, init) != nil {
		return nil, errConflict(codeChapExists, "initiator", "An iSCSI credential for initiator %q already exists.", init)
	}
	cr := &chapState{SVM: svm.UUID, Initiator: init, AuthType: "none"}
	if err := applyCredential(c.body, cr); err != nil {
		return nil, err
	}
	s.m.Credentials = append(s.m.Credentials, cr)
	return c.created(s.renderCredential(cr), "/api/protocols/san/iscsi/credentials/"+svm.UUID+"/"+init), nil
}

func (s *Simulator) patchCredential(c *call) (*reply, *apiError) {
	cr, err := c.credential()
	if err != nil {
		return nil, err
	}
	if err := c.patchBody(credentialPatchFields, credentialResource); err != nil {
		return nil, err
	}
	tmp := *cr
	if err := applyCredential(c.body, &tmp); err != nil {
		return nil, err
	}
	*cr = tmp
	return okReply(), nil
}

func (s *Simulator) deleteCredential(c *call) (*reply, *apiError) {
	cr, err := c.credential()
	if err != nil {
		return nil, err
	}
	if cr.Initiator == "default" {
		return nil, errInvalid(5374155, "initiator", "The default iSCSI credential cannot be deleted.")
	}
	kept := s.m.Credentials[:0]
	for _, other := range s.m.Credentials {
		if other != cr {
			kept = append(kept, other)
		}
	}
	s.m.Credentials = kept
	return okReply(), nil
}

// chapFor is the credential that applies to an initiator's login: its own
// or the SVM default.
func (m *model) chapFor(svm, init string) *chapState {
	for _, c := range m.Credentials {
		if c.SVM == svm && strings.EqualFold(c.Initiator, init) {
			return c
		}
	}
	return m.credential(svm, "default")
}
