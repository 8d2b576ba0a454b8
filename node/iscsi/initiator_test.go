package iscsi

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseInitiatorName(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		err            error
	}{
		{name: "debian", in: "## DO NOT EDIT OR REMOVE THIS FILE!\nInitiatorName=iqn.1993-08.org.debian:01:6e7c6f1b7a1\n", want: "iqn.1993-08.org.debian:01:6e7c6f1b7a1"},
		{name: "first wins, blanks trimmed", in: "  InitiatorName= iqn.2005-03.org.open-iscsi:a \r\nInitiatorName=iqn.2005-03.org.open-iscsi:b\n", want: "iqn.2005-03.org.open-iscsi:a"},
		{name: "commented out", in: "#InitiatorName=iqn.2005-03.org.open-iscsi:a\nInitiatorAlias=node1\n", err: ErrNoInitiatorName},
		{name: "empty", in: "", err: ErrNoInitiatorName},
		{name: "eui", in: "InitiatorName=eui.02004567A425678D\n", want: "eui.02004567A425678D"},
		{name: "garbage value", in: "InitiatorName=not an iqn\n"},
		{name: "option-like value", in: "InitiatorName=-o\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseInitiatorName([]byte(tc.in))
			switch {
			case tc.want != "":
				if err != nil || got != tc.want {
					t.Fatalf("got %q, %v; want %q", got, err, tc.want)
				}
			case tc.err != nil:
				if !errors.Is(err, tc.err) {
					t.Fatalf("got %q, %v; want %v", got, err, tc.err)
				}
			default:
				if err == nil {
					t.Fatalf("got %q, want an error", got)
				}
			}
		})
	}
}

func TestReadInitiatorName(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "initiatorname.iscsi")
	if err := os.WriteFile(p, []byte("InitiatorName=iqn.2005-03.org.open-iscsi:node1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadInitiatorName(p); err != nil || got != "iqn.2005-03.org.open-iscsi:node1" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := ReadInitiatorName(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte(strings.Repeat("#", maxInitiatorFile+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadInitiatorName(big); err == nil {
		t.Fatal("oversized file accepted")
	}
}

func FuzzParseInitiatorName(f *testing.F) {
	f.Add([]byte("InitiatorName=iqn.1993-08.org.debian:01:6e7c6f1b7a1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		name, err := ParseInitiatorName(data)
		if err != nil {
			return
		}
		if validateIQN(name) != nil || !strings.Contains(string(data), name) {
			t.Fatalf("accepted %q", name)
		}
	})
}
