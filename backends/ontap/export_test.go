package ontap

import (
	"testing"
	"time"
)

// LIFTTL is lifTTL, for the tests.
const LIFTTL = lifTTL

// SetNow makes f the clock of the driver's caches until t ends.
func SetNow(t testing.TB, f func() time.Time) {
	old := now
	now = f
	t.Cleanup(func() { now = old })
}

// IdentityTTL is identityTTL, for the tests.
const IdentityTTL = identityTTL
