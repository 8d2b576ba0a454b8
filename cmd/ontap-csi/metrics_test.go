package main

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// putClaimAndClasses adds what the metrics read from the cluster: the PV of
// the volume the test provisions (pvc-e2e, claimed by default/data-e2e),
// the driver's StorageClass, and another driver's, which is not counted.
func (c *cluster) putClaimAndClasses() {
	c.api.put(collectionOf("persistentvolumes"), map[string]any{
		"metadata": map[string]any{"name": "pvc-e2e"},
		"spec": map[string]any{
			"csi":              map[string]any{"driver": "csi.trident.netapp.io", "volumeHandle": "pvc-e2e"},
			"claimRef":         map[string]any{"namespace": "default", "name": "data-e2e"},
			"storageClassName": "ontap-san",
		},
	})
	for name, provisioner := range map[string]string{"ontap-san": "csi.trident.netapp.io", "other": "ebs.csi.aws.com"} {
		c.api.put(collectionOf("storageclasses"), map[string]any{"metadata": map[string]any{"name": name}, "provisioner": provisioner})
	}
}

// checkTridentMetrics scrapes the controller's /metrics (Trident's
// --metrics: port 8001) once its inventory lists pvc-e2e, checks the exact
// Trident series with their labels and values, and renders the shipped
// dashboard's queries against the scrape.
func (c *cluster) checkTridentMetrics(t *testing.T) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dialerIn(c.netns), DisableKeepAlives: true}}
	var scrape string
	// Well within --backend_storage_poll_interval (a minute): a backend
	// loaded from a TridentBackendConfig after start-up is listed at once.
	eventually(t, "the volume in the metrics", 20*time.Second, func() (bool, string) {
		_, scrape = get(t, client, "http://127.0.0.1:8001/metrics")
		return strings.Contains(scrape, `ontap_csi_volume_info{`), scrape
	})
	m := regexp.MustCompile(`trident_backend_info\{backend_name="san",backend_type="ontap-san",backend_uuid="([0-9a-f-]{36})"\} 1`).FindStringSubmatch(scrape)
	if m == nil {
		t.Fatalf("no trident_backend_info for backend san:\n%s", scrape)
	}
	uuid := m[1]
	vol := `backend_type="ontap-san",backend_uuid="` + uuid + `",volume_state="online",volume_type="Filesystem"`
	for _, want := range []string{
		`trident_backend_count{backend_state="online",backend_type="ontap-san"} 1`,
		`trident_volume_count{` + vol + `} 1`,
		`trident_volume_allocated_bytes{` + vol + `} 1.073741824e+09`,
		`trident_volume_total_bytes 1.073741824e+09`,
		`trident_snapshot_count{backend_type="ontap-san",backend_uuid="` + uuid + `"} 1`,
		`trident_snapshot_allocated_bytes{backend_type="ontap-san",backend_uuid="` + uuid + `"} 1.073741824e+09`,
		`trident_node_count 1`,
		`trident_storageclass_count 1`,
		`ontap_csi_volume_info{backend_name="san",backend_uuid="` + uuid + `",namespace="default",persistentvolume="pvc-e2e",persistentvolumeclaim="data-e2e",storageclass="ontap-san",svm="svm0",volume="trident_pvc_e2e"} 1`,
		`trident_build_info{build_type="custom",trident_revision="`,
		`trident_operation_duration_milliseconds_count{operation="volume_publish",success="true"} `,
		`trident_ontap_ops_total{op="GET /storage/volumes",svm="svm0"} `,
		`trident_ontap_operation_duration_in_milliseconds_by_svm_count{op="GET /storage/volumes",svm="svm0"} `,
		`trident_outgoing_api_request_duration_seconds_count{address="127.0.0.1:9443",method="GET",status="success",target="ontap"} `,
	} {
		if !strings.Contains(scrape, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	checkDashboard(t, "../../deploy/grafana/ontap-csi-trident.json", parseScrape(t, scrape))
}
