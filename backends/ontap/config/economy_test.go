package config

import (
	"strings"
	"testing"
	"time"
)

func economyConfig(driver, extra string) string {
	return strings.Replace(minimal(extra), `"ontap-nas"`, `"`+driver+`"`, 1)
}

// TestEconomyDefaults: Trident 26.06's defaults (ontap_nas_qtree.go,
// ontap_san_economy.go): 200 qtrees and 100 LUNs per FlexVol, an 8 h
// deferred delete, a 10 min prune period, no pool size limit.
func TestEconomyDefaults(t *testing.T) {
	nas, err := Parse("t.json", []byte(economyConfig(DriverONTAPNASEconomy, "")), "")
	if err != nil {
		t.Fatal(err)
	}
	want := Economy{QtreesPerFlexvol: 200, LUNsPerFlexvol: 100, EmptyFlexvolDeferredDeletePeriod: 8 * time.Hour, PruneFlexvolsPeriod: 10 * time.Minute}
	if nas.Economy == nil || *nas.Economy != want || nas.IsSAN() || !nas.IsEconomy() || nas.StoragePrefix != "trident_" {
		t.Errorf("ontap-nas-economy: %+v, san %v", nas.Economy, nas.IsSAN())
	}
	san, err := Parse("t.json", []byte(economyConfig(DriverONTAPSANEconomy, "")), "")
	if err != nil {
		t.Fatal(err)
	}
	if san.Economy == nil || san.Economy.LUNsPerFlexvol != 100 || !san.IsSAN() {
		t.Errorf("ontap-san-economy: %+v", san.Economy)
	}
	plain, err := Parse("t.json", []byte(minimal(`,"qtreesPerFlexvol":"100"`)), "")
	if err != nil || plain.Economy != nil || len(plain.Warnings) == 0 {
		t.Errorf("ontap-nas with an economy key: %+v %v %v", plain.Economy, plain.Warnings, err)
	}
}

func TestEconomyKeys(t *testing.T) {
	cfg, err := Parse("t.json", []byte(economyConfig(DriverONTAPNASEconomy,
		`,"qtreesPerFlexvol":"50","limitVolumePoolSize":"2Ti","denyNewVolumePools":"true","emptyFlexvolDeferredDeletePeriod":"0","qtreePruneFlexvolsPeriod":60,"storagePrefix":"k8s-a_"`)), "")
	if err != nil {
		t.Fatal(err)
	}
	want := Economy{QtreesPerFlexvol: 50, LUNsPerFlexvol: 100, LimitVolumePoolSize: 2 << 40, DenyNewVolumePools: true, PruneFlexvolsPeriod: time.Minute}
	if *cfg.Economy != want {
		t.Errorf("got %+v, want %+v", *cfg.Economy, want)
	}
	// Values Trident ignores with a warning fall back to its defaults.
	cfg, err = Parse("t.json", []byte(economyConfig(DriverONTAPNASEconomy, `,"denyNewVolumePools":"maybe","emptyFlexvolDeferredDeletePeriod":"-5"`)), "")
	if err != nil || cfg.Economy.DenyNewVolumePools || cfg.Economy.EmptyFlexvolDeferredDeletePeriod != 8*time.Hour || len(cfg.Warnings) < 2 {
		t.Errorf("%+v %v %v", cfg.Economy, cfg.Warnings, err)
	}
}

func TestEconomyRejects(t *testing.T) {
	for _, tc := range []struct{ driver, extra, want string }{
		{DriverONTAPNASEconomy, `,"qtreesPerFlexvol":"49"`, "qtreesPerFlexvol: 49 is outside 50..300"},
		{DriverONTAPNASEconomy, `,"qtreesPerFlexvol":"301"`, "qtreesPerFlexvol: 301 is outside 50..300"},
		{DriverONTAPSANEconomy, `,"lunsPerFlexvol":"201"`, "lunsPerFlexvol: 201 is outside 50..200"},
		{DriverONTAPSANEconomy, `,"lunsPerFlexvol":"many"`, `lunsPerFlexvol: "many" is not an integer`},
		{DriverONTAPNASEconomy, `,"limitVolumePoolSize":"big"`, `limitVolumePoolSize: "big" is not a size`},
		{DriverONTAPNASEconomy, `,"storagePrefix":"a.b"`, `storagePrefix: "a.b": ontap-nas-economy`},
		{DriverONTAPSANEconomy, `,"storagePrefix":"a-b"`, `storagePrefix: "a-b": ontap-san-economy`},
	} {
		_, err := Parse("t.json", []byte(economyConfig(tc.driver, tc.extra)), "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want %q", tc.driver, tc.extra, err, tc.want)
		}
	}
	// Trident allows a leading digit in an economy prefix.
	if _, err := Parse("t.json", []byte(economyConfig(DriverONTAPSANEconomy, `,"storagePrefix":"1k8s_"`)), ""); err != nil {
		t.Error(err)
	}
}
