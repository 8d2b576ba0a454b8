package rest

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/ontap-csi/ontap-csi/server"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// endpointLabel is "METHOD /template": no UUIDs, names or numbers.
var endpointLabel = regexp.MustCompile(`^(GET|POST|PATCH|DELETE) (/[a-z_*-]+|/\{[a-z.]+\})+$`)

func TestMetricsAndLogsUseTemplatesAndNoSecrets(t *testing.T) {
	hook := logtest.NewGlobal()
	level := logrus.GetLevel()
	logrus.SetLevel(logrus.DebugLevel)
	t.Cleanup(func() { logrus.SetLevel(level); logrus.StandardLogger().ReplaceHooks(logrus.LevelHooks{}) })

	s, c := startSim(t, ontapsim.Config{}, nil)
	ctx := context.Background()
	check(t, c.CreateVolume(ctx, VolumeCreate{Name: "m_vol", Aggregate: s.Info().Aggregates[0], Size: 1 << 30}))
	v := must(c.GetVolume(ctx, "m_vol"))(t)
	check(t, c.DeleteVolume(ctx, v.UUID, true))
	if err := c.DeleteVolume(ctx, v.UUID, true); !IsNotFound(err) {
		t.Fatal(err)
	}
	pol := must(c.CreateExportPolicy(ctx, "m_pol"))(t)
	check(t, c.DeleteExportPolicy(ctx, pol.ID))

	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "ontap_csi_ontap_") {
			continue
		}
		seen[f.GetName()] = true
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "endpoint" && !endpointLabel.MatchString(l.GetValue()) {
					t.Errorf("%s: endpoint label %q is not a template", f.GetName(), l.GetValue())
				}
				if l.GetName() == "class" && l.GetValue() == "not_found" {
					seen["not_found class"] = true
				}
			}
		}
	}
	for _, want := range []string{"ontap_csi_ontap_request_duration_seconds", "ontap_csi_ontap_request_errors_total", "not_found class"} {
		if !seen[want] {
			t.Errorf("no %s", want)
		}
	}

	var requestLines int
	for _, e := range hook.AllEntries() {
		line, _ := e.String()
		if strings.Contains(line, "secret") {
			t.Errorf("log line shows the password: %s", line)
		}
		if e.Message == "ONTAP request" {
			requestLines++
			for _, k := range []string{"method", "endpoint", "status", "duration", "attempt"} {
				if _, ok := e.Data[k]; !ok {
					t.Errorf("request line lacks %s: %s", k, line)
				}
			}
			if ep, _ := e.Data["endpoint"].(string); !strings.HasPrefix(ep, "/") || strings.Contains(ep, v.UUID) {
				t.Errorf("endpoint field %q", ep)
			}
		}
	}
	if requestLines < 6 {
		t.Errorf("%d request log lines, want one per request", requestLines)
	}
}

// Every ONTAP request line of a call carries the request id of the CSI call
// whose context it ran in, and no other: the server's hook adds it to what
// the client logs with that context. A create's SVM lookup, its refused
// first attempt and its retry alike.
func TestRequestLinesCarryTheCallsRequestID(t *testing.T) {
	logrus.AddHook(server.RequestIDHook{})
	hook := logtest.NewGlobal()
	level := logrus.GetLevel()
	logrus.SetLevel(logrus.DebugLevel)
	t.Cleanup(func() { logrus.SetLevel(level); logrus.StandardLogger().ReplaceHooks(logrus.LevelHooks{}) })

	s, c := startSim(t, ontapsim.Config{}, nil)
	s.SetFaults([]ontapsim.FaultRule{{Method: "POST", Path: "/storage/volumes", Rate: 1, Limit: 1, Kind: ontapsim.FaultUnavailable}})
	requestLines := func(want string) (n int, attempts []any) {
		t.Helper()
		for _, e := range hook.AllEntries() {
			if !strings.HasPrefix(e.Message, "ONTAP request") {
				continue
			}
			n++
			attempts = append(attempts, e.Data["attempt"])
			if got := e.Data["req_id"]; got != want {
				line, _ := e.String()
				t.Errorf("request line with req_id %v, want %s: %s", got, want, line)
			}
		}
		hook.Reset()
		return n, attempts
	}

	ctx := server.WithRequestID(context.Background(), "req-create")
	check(t, c.CreateVolume(ctx, VolumeCreate{Name: "r_vol", Aggregate: s.Info().Aggregates[0], Size: 1 << 30}))
	if n, attempts := requestLines("req-create"); n < 3 || !slices.Contains(attempts, any(2)) {
		t.Errorf("create: %d request lines, attempts %v; want the SVM lookup, the refused POST and its retry (attempt 2)", n, attempts)
	}
	ctx = server.WithRequestID(context.Background(), "req-delete")
	v := must(c.GetVolume(ctx, "r_vol"))(t)
	check(t, c.DeleteVolume(ctx, v.UUID, true))
	if n, _ := requestLines("req-delete"); n < 2 {
		t.Errorf("delete: %d request lines, want the lookup and the DELETE", n)
	}
}

// TestTridentSeries: each request counts in Trident's per-SVM ONTAP
// series and its outgoing-API series, with their label sets, and the
// operation label is an endpoint template.
func TestTridentSeries(t *testing.T) {
	s, c := startSim(t, ontapsim.Config{}, nil)
	ctx := context.Background()
	check(t, c.CreateVolume(ctx, VolumeCreate{Name: "t_vol", Aggregate: s.Info().Aggregates[0], Size: 1 << 30}))
	svm := s.Info().SVM
	op := "POST /storage/volumes"
	if n := testutil.ToFloat64(tridentOpsTotal.WithLabelValues(svm, op)); n < 1 {
		t.Errorf("trident_ontap_ops_total{svm=%q,op=%q} = %v", svm, op, n)
	}
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"trident_ontap_ops_total":                                 {"op", "svm"},
		"trident_ontap_operation_duration_in_milliseconds_by_svm": {"op", "svm"},
		"trident_outgoing_api_request_duration_seconds":           {"address", "method", "status", "target"},
		"trident_outgoing_api_requests_in_flight":                 {"address", "method", "target"},
	}
	for _, f := range families {
		labels, ok := want[f.GetName()]
		if !ok {
			continue
		}
		delete(want, f.GetName())
		for _, m := range f.GetMetric() {
			var got []string
			for _, l := range m.GetLabel() {
				got = append(got, l.GetName())
				if l.GetName() == "op" && !endpointLabel.MatchString(l.GetValue()) {
					t.Errorf("%s: op %q is not a template", f.GetName(), l.GetValue())
				}
			}
			if !slices.Equal(got, labels) {
				t.Errorf("%s labels %v, want %v", f.GetName(), got, labels)
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("series missing: %v", want)
	}
}
