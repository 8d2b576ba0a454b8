package naseco

import (
	"testing"

	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
	"github.com/ontap-csi/ontap-csi/test/sanity"
)

func TestMain(m *testing.M) { plugintest.Main(m) }

// TestSanity runs csi-sanity against ontap-csi --csi_role=allInOne with
// an ontap-nas-economy backend (autoExportPolicy on, snapshotDir true) on
// the ONTAP simulator: qtrees in pool FlexVols, mounted through the NFS
// shim at /<pool>/<qtree>.
func TestSanity(t *testing.T) { sanity.Run(t, config.DriverONTAPNASEconomy) }
