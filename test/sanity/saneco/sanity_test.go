package saneco

import (
	"testing"

	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
	"github.com/ontap-csi/ontap-csi/test/sanity"
)

func TestMain(m *testing.M) { plugintest.Main(m) }

// TestSanity runs csi-sanity against ontap-csi --csi_role=allInOne with
// an ontap-san-economy backend on the ONTAP simulator: LUNs in pool
// FlexVols, attached through the iSCSI shims.
func TestSanity(t *testing.T) { sanity.Run(t, config.DriverONTAPSANEconomy) }
