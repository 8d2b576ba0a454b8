package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// sample is one line of a Prometheus text scrape.
type sample struct {
	name   string
	labels map[string]string
}

// parseScrape reads the samples of a text exposition.
func parseScrape(t *testing.T, text string) []sample {
	t.Helper()
	var out []sample
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, ok := parseSample(line)
		if !ok {
			t.Fatalf("cannot read scrape line %q", line)
		}
		out = append(out, s)
	}
	return out
}

func parseSample(line string) (sample, bool) {
	s := sample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, false
	}
	s.name = line[:i]
	if line[i] != '{' {
		return s, true
	}
	rest := line[i+1:]
	for !strings.HasPrefix(rest, "}") {
		eq := strings.Index(rest, `="`)
		if eq < 0 {
			return s, false
		}
		name := strings.TrimPrefix(rest[:eq], ",")
		value, n, ok := quoted(rest[eq+1:])
		if !ok {
			return s, false
		}
		s.labels[name] = value
		rest = strings.TrimPrefix(rest[eq+1+n:], ",")
	}
	return s, true
}

// quoted reads a double-quoted, backslash-escaped string at the start of s
// and returns it and the bytes it took.
func quoted(s string) (string, int, bool) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 < len(s) {
				i++
				if s[i] == 'n' {
					b.WriteByte('\n')
				} else {
					b.WriteByte(s[i])
				}
			}
		case '"':
			return b.String(), i + 1, true
		default:
			b.WriteByte(s[i])
		}
	}
	return "", 0, false
}

// selector is a metric selector of a PromQL query: the metric and its
// label matchers.
type selector struct {
	metric   string
	matchers []matcher
}

type matcher struct{ label, op, value string }

// promQuery is what a query refers to: its selectors, and the labels its
// by/without/on/ignoring/group_left/group_right clauses name.
type promQuery struct {
	selectors []selector
	labels    []string
}

var (
	promIdent    = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promMatcher  = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?`)
	promGrouping = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}
	promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true}
)

// parsePromQL extracts the selectors and grouping labels of expr: enough
// PromQL to check a dashboard against a scrape, not an evaluator.
func parsePromQL(expr string) (promQuery, bool) {
	var q promQuery
	s := expr
	for s != "" {
		r := rune(s[0])
		switch {
		case unicode.IsSpace(r) || strings.ContainsRune("()+-*/^%<>=!,", r):
			s = s[1:]
		case r == '[': // a range: [5m], [$__rate_interval]
			end := strings.IndexByte(s, ']')
			if end < 0 {
				return q, false
			}
			s = s[end+1:]
		case r == '"' || r == '\'':
			end := strings.IndexByte(s[1:], s[0])
			if end < 0 {
				return q, false
			}
			s = s[end+2:]
		case r >= '0' && r <= '9' || r == '.':
			s = strings.TrimLeft(s, "0123456789.eE")
		default:
			id := promIdent.FindString(s)
			if id == "" {
				return q, false
			}
			s = s[len(id):]
			next := strings.TrimLeft(s, " ")
			switch {
			case promGrouping[id]:
				labels, rest, ok := labelList(next)
				if !ok {
					return q, false
				}
				q.labels, s = append(q.labels, labels...), rest
			case promKeywords[id] || strings.HasPrefix(next, "("): // a function or aggregation
			case promGrouping[promIdent.FindString(next)]: // sum by (...) (...)
			default:
				sel := selector{metric: id}
				if strings.HasPrefix(next, "{") {
					rest := next[1:]
					for {
						m := promMatcher.FindStringSubmatch(rest)
						if m == nil {
							break
						}
						sel.matchers = append(sel.matchers, matcher{m[1], m[2], m[3]})
						rest = rest[len(m[0]):]
					}
					if !strings.HasPrefix(strings.TrimSpace(rest), "}") {
						return q, false
					}
					s = strings.TrimSpace(rest)[1:]
				}
				q.selectors = append(q.selectors, sel)
			}
		}
	}
	return q, true
}

// labelList reads "(a, b)" and returns the labels and what follows.
func labelList(s string) ([]string, string, bool) {
	if !strings.HasPrefix(s, "(") {
		return nil, s, true // group_left without labels
	}
	end := strings.IndexByte(s, ')')
	if end < 0 {
		return nil, s, false
	}
	var out []string
	for _, l := range strings.Split(s[1:end], ",") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out, s[end+1:], true
}

// matches reports whether a series is the metric a query names: itself,
// or a _count, _sum or _bucket series of the summary or histogram named.
func matches(s sample, metric string) bool {
	for _, suffix := range []string{"", "_count", "_sum", "_bucket"} {
		if s.name == metric+suffix {
			return true
		}
	}
	return false
}

// selectorMatches reports whether a sample can answer a selector. A value
// holding a dashboard variable ($backend) matches any value of the label,
// and so does a negative matcher (!=, !~): a panel counting the backends
// that are not online rightly finds none in a healthy scrape, so for those
// the label must exist, not the value.
func selectorMatches(s sample, sel selector) bool {
	if !matches(s, sel.metric) {
		return false
	}
	for _, m := range sel.matchers {
		v, has := s.labels[m.label]
		switch {
		case !has:
			return false
		case strings.Contains(m.value, "$") || m.op == "!=" || m.op == "!~":
		case m.op == "=" && v != m.value:
			return false
		case m.op == "=~":
			re, err := regexp.Compile("^(?:" + m.value + ")$")
			if err != nil || !re.MatchString(v) {
				return false
			}
		}
	}
	return true
}

// dashboardQueries returns every PromQL query of a Grafana dashboard: the
// panels' targets and the query variables' label_values(...).
func dashboardQueries(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]string{}
	for _, p := range d.Panels {
		for i, tg := range p.Targets {
			out[p.Title+" #"+string(rune('A'+i))] = tg.Expr
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			// label_values(metric, label): the metric must have the label.
			m := regexp.MustCompile(`^label_values\(\s*([^,]+),\s*(\w+)\s*\)$`).FindStringSubmatch(v.Definition)
			if m == nil {
				t.Fatalf("variable %s: %q is not label_values(metric, label)", v.Name, v.Definition)
			}
			out["variable "+v.Name] = "sum by (" + m[2] + ") (" + m[1] + ")"
		}
	}
	if len(out) < 10 {
		t.Fatalf("%s: only %d queries", path, len(out))
	}
	return out
}

// checkDashboard renders every query of the dashboard against a scrape:
// each selector matches a series of the scrape, and every label the query
// groups or joins on is on a series it selects.
func checkDashboard(t *testing.T, path string, scrape []sample) {
	t.Helper()
	for where, expr := range dashboardQueries(t, path) {
		q, ok := parsePromQL(expr)
		if !ok || len(q.selectors) == 0 {
			t.Errorf("%s: cannot read %q", where, expr)
			continue
		}
		labels := map[string]bool{}
		for _, sel := range q.selectors {
			n := 0
			for _, s := range scrape {
				if selectorMatches(s, sel) {
					n++
					for l := range s.labels {
						labels[l] = true
					}
				}
			}
			if n == 0 {
				t.Errorf("%s: no series of the scrape matches %s%v in %q", where, sel.metric, sel.matchers, expr)
			}
		}
		for _, l := range q.labels {
			if !labels[l] {
				t.Errorf("%s: label %q is on no series %q selects", where, l, expr)
			}
		}
	}
}

// TestPromQLReading keeps the checker honest on the forms the dashboard
// uses.
func TestPromQLReading(t *testing.T) {
	q, ok := parsePromQL(`histogram_quantile(0.99, sum by (le, address) (rate(trident_outgoing_api_request_duration_seconds_bucket{target="ontap",method=~"G.*"}[$__rate_interval])))`)
	if !ok || len(q.selectors) != 1 || q.selectors[0].metric != "trident_outgoing_api_request_duration_seconds_bucket" ||
		len(q.selectors[0].matchers) != 2 || strings.Join(q.labels, ",") != "le,address" {
		t.Fatalf("%+v %v", q, ok)
	}
	q, ok = parsePromQL(`sum by (backend_name) (trident_volume_count * on (backend_uuid) group_left (backend_name) trident_backend_info{backend_name=~"$backend"}) or vector(0)`)
	if !ok || len(q.selectors) != 2 || strings.Join(q.labels, ",") != "backend_name,backend_uuid,backend_name" {
		t.Fatalf("%+v %v", q, ok)
	}
	scrape := parseScrape(t, "# HELP x\nx_count{a=\"1\",b=\"q\\\"t\"} 3\ny 1\n")
	if len(scrape) != 2 || scrape[0].labels["b"] != `q"t` || !selectorMatches(scrape[0], selector{"x", []matcher{{"a", "=", "1"}}}) ||
		selectorMatches(scrape[0], selector{"x", []matcher{{"a", "=", "2"}}}) || selectorMatches(scrape[0], selector{"x", []matcher{{"c", "!=", "1"}}}) ||
		!selectorMatches(scrape[1], selector{"y", nil}) {
		t.Fatalf("%+v", scrape)
	}
}
