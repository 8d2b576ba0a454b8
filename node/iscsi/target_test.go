package iscsi

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestTargetNormalized(t *testing.T) {
	ok := testTarget()
	for _, tc := range []struct {
		name    string
		edit    func(t *Target)
		portals []string // want, when valid
		iface   string
	}{
		{name: "defaults", edit: func(t *Target) {}, portals: []string{"10.0.0.1:3260"}, iface: "default"},
		{
			name: "portal forms, deduplicated",
			edit: func(t *Target) {
				t.Portals = []string{"10.0.0.1", "10.0.0.1:3260", "[fd20::11]", "fd20:0::11", "[fd20::12]:3261", "LIF1.example.com"}
			},
			portals: []string{"10.0.0.1:3260", "[fd20::11]:3260", "[fd20::12]:3261", "lif1.example.com:3260"},
			iface:   "default",
		},
		{name: "interface kept", edit: func(t *Target) { t.Interface = "iface0" }, portals: []string{"10.0.0.1:3260"}, iface: "iface0"},
		{name: "bad IQN", edit: func(t *Target) { t.IQN = "-o delete" }},
		{name: "IQN with space", edit: func(t *Target) { t.IQN = "iqn.1992-08.com.netapp:sn x" }},
		{name: "no portals", edit: func(t *Target) { t.Portals = nil }},
		{name: "portal option", edit: func(t *Target) { t.Portals = []string{"-u"} }},
		{name: "portal port", edit: func(t *Target) { t.Portals = []string{"10.0.0.1:0"} }},
		{name: "portal zone", edit: func(t *Target) { t.Portals = []string{"[fe80::1%eth0]:3260"} }},
		{name: "negative LUN", edit: func(t *Target) { t.LUN = -1 }},
		{name: "huge LUN", edit: func(t *Target) { t.LUN = 1 << 20 }},
		{name: "no serial", edit: func(t *Target) { t.Serial = "" }},
		{name: "serial with newline", edit: func(t *Target) { t.Serial = "abc\ndef" }},
		{name: "interface path", edit: func(t *Target) { t.Interface = "../x" }},
		{name: "CHAP without secret", edit: func(t *Target) { t.CHAP = &CHAP{Username: "u"} }},
		{name: "mutual CHAP half set", edit: func(t *Target) { t.CHAP = &CHAP{Username: "u", InitiatorSecret: "s", TargetUsername: "tu"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := ok
			in.Portals = append([]string(nil), ok.Portals...)
			tc.edit(&in)
			got, err := in.normalized()
			if tc.portals == nil {
				if !errors.Is(err, ErrInvalidTarget) {
					t.Fatalf("normalized: %v, want ErrInvalidTarget", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Portals, tc.portals) || got.Interface != tc.iface {
				t.Fatalf("portals %v interface %q, want %v %q", got.Portals, got.Interface, tc.portals, tc.iface)
			}
		})
	}
}

func TestCHAPIsNeverPrinted(t *testing.T) {
	tgt := testTarget()
	tgt.CHAP = &CHAP{Username: "user", InitiatorSecret: "initsecret", TargetUsername: "tuser", TargetSecret: "tgtsecret"}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(format, tgt)
		if strings.Contains(out, "secret") {
			t.Fatalf("%s shows a secret: %s", format, out)
		}
	}
	if f := fmt.Sprint(tgt.fields()); strings.Contains(f, "secret") {
		t.Fatalf("log fields show a secret: %s", f)
	}
}
