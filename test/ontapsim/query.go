package ontapsim

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// schema is the set of dotted field paths of a record type ("nas.path",
// "aggregates.name"; array elements are transparent). It validates fields=,
// filters and body keys.
type schema map[string]bool

func newSchema(paths string) schema {
	s := schema{}
	for _, p := range strings.Fields(paths) {
		s[p] = true
	}
	return s
}

// known reports whether p is a field path or an interior node of one
// ("nas" for "nas.path").
func (s schema) known(p string) bool {
	if s[p] {
		return true
	}
	prefix := p + "."
	for k := range s {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// resource describes how a record type is listed.
type resource struct {
	schema    schema
	keys      []string // fields returned when no fields= is given
	expensive []string // subtrees left out of "*" and instance GETs
	sortKey   string   // default order and paging cursor
	cursor    string   // cursor parameter, default "start.<sortKey>"
}

func (r *resource) cursorParam() string {
	if r.cursor != "" {
		return r.cursor
	}
	return "start." + r.sortKey
}

// selector is a tree of field paths to keep in a projected record.
type selector struct {
	all      bool // keep everything below, except dropped children
	drop     bool // drop this key (under an all parent)
	children map[string]*selector
}

func (s *selector) child(k string) *selector {
	if s.children == nil {
		s.children = map[string]*selector{}
	}
	c := s.children[k]
	if c == nil {
		c = &selector{}
		s.children[k] = c
	}
	return c
}

func (s *selector) include(path string) {
	n := s
	for _, k := range strings.Split(path, ".") {
		n = n.child(k)
		n.drop = false
	}
	n.all = true
	n.children = nil
}

func (s *selector) exclude(path string) {
	n := s
	for _, k := range strings.Split(path, ".") {
		n = n.child(k)
	}
	n.drop = true
	n.all = false
	n.children = nil
}

// project copies the parts of v that s keeps.
func project(v any, s *selector, inherit bool) any {
	all := inherit || (s != nil && s.all)
	switch t := v.(type) {
	case []any:
		out := make([]any, 0, len(t))
		for _, e := range t {
			out = append(out, project(e, s, inherit))
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, val := range t {
			var c *selector
			if s != nil {
				c = s.children[k]
			}
			switch {
			case c != nil && c.drop:
			case c != nil:
				out[k] = project(val, c, all)
			case all:
				out[k] = val
			}
		}
		return out
	}
	return v
}

// fieldsSpec splits a fields= value on top-level commas, expanding
// "a.{b,c}" into "a.b,a.c". Hyphens become underscores (Trident asks for
// "logical-unit-number", which ONTAP accepts).
func fieldsSpec(v string) ([]string, *apiError) {
	var out []string
	depth, start := 0, 0
	for i := 0; i <= len(v); i++ {
		if i < len(v) {
			switch v[i] {
			case '{':
				depth++
				continue
			case '}':
				depth--
				if depth < 0 {
					return nil, errInvalid(codeBadBraces, "fields", "Mismatched braces in fields %q.", v)
				}
				continue
			case ',':
				if depth > 0 {
					continue
				}
			default:
				continue
			}
		}
		if depth != 0 {
			return nil, errInvalid(codeBadBraces, "fields", "Mismatched braces in fields %q.", v)
		}
		item := strings.TrimSpace(v[start:i])
		start = i + 1
		if item == "" {
			continue
		}
		exp, err := expandBraces(item)
		if err != nil {
			return nil, err
		}
		out = append(out, exp...)
	}
	for i, f := range out {
		out[i] = strings.ReplaceAll(f, "-", "_")
	}
	return out, nil
}

func expandBraces(item string) ([]string, *apiError) {
	open := strings.IndexByte(item, '{')
	if open < 0 {
		return []string{item}, nil
	}
	if !strings.HasSuffix(item, "}") {
		return nil, errInvalid(codeBadBraces, "fields", "Mismatched braces in fields %q.", item)
	}
	prefix := item[:open]
	inner, err := fieldsSpec(item[open+1 : len(item)-1])
	if err != nil {
		return nil, err
	}
	neg := strings.HasPrefix(prefix, "!")
	prefix = strings.TrimPrefix(prefix, "!")
	var out []string
	for _, f := range inner {
		p := prefix + f
		if neg {
			p = "!" + p
		}
		out = append(out, p)
	}
	return out, nil
}

// buildSelector turns fields= into a selector for res. filterPaths are
// added because ONTAP returns filtered fields with every record.
func buildSelector(res *resource, fields string, instance, ignoreUnknown bool, filterPaths []string) (*selector, *apiError) {
	sel := &selector{}
	for _, k := range res.keys {
		sel.include(k)
	}
	items, err := fieldsSpec(fields)
	if err != nil {
		return nil, err
	}
	// An instance GET without fields= returns the standard fields; with
	// fields= it returns the keys plus what was asked for.
	standard, everything := instance && strings.TrimSpace(fields) == "", false
	var includes, excludes []string
	for _, f := range items {
		switch {
		case f == "*":
			standard = true
		case f == "**":
			everything = true
		case strings.HasPrefix(f, "!"):
			excludes = append(excludes, f[1:])
		default:
			includes = append(includes, f)
		}
	}
	for _, f := range append(append([]string{}, includes...), excludes...) {
		if !res.schema.known(f) && !ignoreUnknown {
			return nil, errInvalid(codeInvalidValue, "fields", "The value %q is invalid for field \"fields\" (unknown field).", f)
		}
	}
	switch {
	case everything:
		sel.all = true
	case standard:
		sel.all = true
		for _, e := range res.expensive {
			sel.exclude(e)
		}
		for _, k := range res.keys {
			sel.include(k)
		}
	}
	for _, f := range includes {
		sel.include(f)
	}
	for _, f := range filterPaths {
		sel.include(f)
	}
	for _, f := range excludes {
		sel.exclude(f)
	}
	sel.include("_links")
	return sel, nil
}

// ---- filters ----

// filterExpr is one "<field>=<query>" parameter.
type filterExpr struct {
	path []string
	alts []matcher // OR of alternatives ("a|b")
}

type matcher struct {
	neg     bool
	op      string // "=", "<", ">", "<=", ">=", "..", "null"
	val, hi string
	literal bool
}

// MatchQuery reports whether value matches query as the simulator reads a
// "<field>=<query>" filter (docs/design/ontap-rest.md §2.1). The REST client's tests
// check their query literals against it.
func MatchQuery(query, value string) bool {
	f := parseFilter("v", query)
	return f.match(map[string]any{"v": value})
}

func parseFilter(field, q string) filterExpr {
	f := filterExpr{path: strings.Split(field, ".")}
	for _, alt := range splitAlternatives(q) {
		f.alts = append(f.alts, parseMatcher(alt))
	}
	return f
}

// splitAlternatives splits on '|' outside quotes and braces.
func splitAlternatives(q string) []string {
	var out []string
	depth, quoted, start := 0, false, 0
	for i := 0; i < len(q); i++ {
		switch q[i] {
		case '"':
			quoted = !quoted
		case '{':
			depth++
		case '}':
			depth--
		case '|':
			if !quoted && depth == 0 {
				out = append(out, q[start:i])
				start = i + 1
			}
		}
	}
	return append(out, q[start:])
}

func parseMatcher(s string) matcher {
	var m matcher
	if strings.HasPrefix(s, "!") {
		m.neg = true
		s = s[1:]
	}
	if len(s) >= 2 && ((s[0] == '"' && s[len(s)-1] == '"') || (s[0] == '{' && s[len(s)-1] == '}')) {
		m.op, m.val, m.literal = "=", s[1:len(s)-1], true
		return m
	}
	switch {
	case s == "null":
		m.op = "null"
	case strings.HasPrefix(s, "<="):
		m.op, m.val = "<=", s[2:]
	case strings.HasPrefix(s, ">="):
		m.op, m.val = ">=", s[2:]
	case strings.HasPrefix(s, "<"):
		m.op, m.val = "<", s[1:]
	case strings.HasPrefix(s, ">"):
		m.op, m.val = ">", s[1:]
	case strings.Contains(s, ".."):
		lo, hi, _ := strings.Cut(s, "..")
		m.op, m.val, m.hi = "..", lo, hi
	default:
		m.op, m.val = "=", s
	}
	return m
}

// leaves collects the scalar values at path in v, looking through arrays.
func leaves(v any, path []string) []any {
	if len(path) == 0 {
		switch t := v.(type) {
		case []any:
			var out []any
			for _, e := range t {
				out = append(out, leaves(e, nil)...)
			}
			return out
		case map[string]any, nil:
			return nil
		}
		return []any{v}
	}
	switch t := v.(type) {
	case map[string]any:
		c, ok := t[path[0]]
		if !ok {
			return nil
		}
		return leaves(c, path[1:])
	case []any:
		var out []any
		for _, e := range t {
			out = append(out, leaves(e, path)...)
		}
		return out
	}
	return nil
}

func scalarString(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case bool:
		return strconv.FormatBool(t)
	case int:
		return strconv.Itoa(t)
	case int64:
		return strconv.FormatInt(t, 10)
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

func (f *filterExpr) match(rec map[string]any) bool {
	vals := leaves(rec, f.path)
	for _, m := range f.alts {
		if m.match(vals) {
			return true
		}
	}
	return false
}

func (m matcher) match(vals []any) bool {
	var hit bool
	if m.op == "null" {
		hit = len(vals) == 0
	} else {
		for _, v := range vals {
			if m.matchOne(scalarString(v)) {
				hit = true
				break
			}
		}
	}
	return hit != m.neg
}

func (m matcher) matchOne(s string) bool {
	switch m.op {
	case "=":
		if !m.literal && strings.Contains(m.val, "*") {
			return globMatch(m.val, s)
		}
		return s == m.val
	case "..":
		return compare(s, m.val) >= 0 && compare(s, m.hi) <= 0
	case "<":
		return compare(s, m.val) < 0
	case ">":
		return compare(s, m.val) > 0
	case "<=":
		return compare(s, m.val) <= 0
	case ">=":
		return compare(s, m.val) >= 0
	}
	return false
}

// compare orders numerically when both sides are numbers.
func compare(a, b string) int {
	fa, ea := strconv.ParseFloat(a, 64)
	fb, eb := strconv.ParseFloat(b, 64)
	if ea == nil && eb == nil {
		switch {
		case fa < fb:
			return -1
		case fa > fb:
			return 1
		}
		return 0
	}
	return strings.Compare(a, b)
}

// globMatch matches '*' (any run of characters) only; every other
// character is literal, so "/vol/trident_*/lun0" works on LUN paths.
func globMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := len(parts) - 1
	for i := 1; i < last; i++ {
		idx := strings.Index(s, parts[i])
		if idx < 0 {
			return false
		}
		s = s[idx+len(parts[i]):]
	}
	return strings.HasSuffix(s, parts[last])
}

// ---- collection queries ----

// controlParams are the query parameters every collection GET understands.
var controlParams = map[string]bool{
	"fields": true, "ignore_unknown_fields": true, "return_records": true, "return_timeout": true,
	"max_records": true, "order_by": true, "offset": true,
}

type listQuery struct {
	filters  []filterExpr
	sel      *selector
	max      int
	offset   int
	start    string
	orderBy  []orderKey
	noRecord bool
}

type orderKey struct {
	path []string
	desc bool
}

// parseListQuery validates a collection GET query for res. extra names
// endpoint-specific parameters that are accepted and ignored.
func parseListQuery(res *resource, q url.Values, extra ...string) (*listQuery, *apiError) {
	lq := &listQuery{max: 10000}
	ignoreUnknown := q.Get("ignore_unknown_fields") == "true"
	var filterPaths []string
	names := make([]string, 0, len(q))
	for k := range q {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v := q[k][len(q[k])-1]
		switch {
		case controlParams[k]:
		case strings.HasPrefix(k, "start."):
			lq.start = v
		case contains(extra, k):
		case res.schema.known(k):
			lq.filters = append(lq.filters, parseFilter(k, v))
			filterPaths = append(filterPaths, k)
		default:
			return nil, errInvalid(codeUnexpectedArgument, k, "Unexpected argument %q.", k)
		}
	}
	if err := checkCommonParams(q); err != nil {
		return nil, err
	}
	if v := q.Get("max_records"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, errInvalid(codeInvalidValue, "max_records", "The value %q is invalid for field \"max_records\".", v)
		}
		lq.max = min(n, 10000)
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, errInvalid(codeInvalidValue, "offset", "The value %q is invalid for field \"offset\".", v)
		}
		lq.offset = n
	}
	if q.Get("return_records") == "false" {
		lq.noRecord = true
	}
	if v := q.Get("order_by"); v != "" {
		for _, item := range strings.Split(v, ",") {
			f := strings.Fields(item)
			if len(f) == 0 || len(f) > 2 || !res.schema.known(f[0]) {
				return nil, errInvalid(262268, "order_by", "Field %q is not supported for order_by.", item)
			}
			k := orderKey{path: strings.Split(f[0], ".")}
			if len(f) == 2 {
				switch f[1] {
				case "asc":
				case "desc":
					k.desc = true
				default:
					return nil, errInvalid(codeInvalidValue, "order_by", "The value %q is invalid for field \"order_by\".", item)
				}
			}
			lq.orderBy = append(lq.orderBy, k)
		}
	}
	sel, err := buildSelector(res, q.Get("fields"), false, ignoreUnknown, filterPaths)
	if err != nil {
		return nil, err
	}
	lq.sel = sel
	return lq, nil
}

// checkCommonParams validates the parameters shared by all methods.
func checkCommonParams(q url.Values) *apiError {
	if v := q.Get("return_timeout"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 120 {
			return errInvalid(codeInvalidValue, "return_timeout", "The value %q is invalid for field \"return_timeout\" (<0..120>)", v)
		}
	}
	for _, b := range []string{"return_records", "ignore_unknown_fields"} {
		if v := q.Get(b); v != "" && v != "true" && v != "false" {
			return errInvalid(codeInvalidValue, b, "The value %q is invalid for field %q (<true|false>)", v, b)
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// mayMatch runs the filters on the fields that partial holds (a filter's
// first path element is one of its keys) and reports whether they pass;
// the other filters are left to run, which needs the whole record.
func (lq *listQuery) mayMatch(partial map[string]any) bool {
	for i := range lq.filters {
		if _, ok := partial[lq.filters[i].path[0]]; ok && !lq.filters[i].match(partial) {
			return false
		}
	}
	return true
}

// run filters, orders, pages and projects records. It returns the page and
// the cursor of the next page ("" when this is the last one).
func (lq *listQuery) run(res *resource, recs []map[string]any) (page []map[string]any, next url.Values, total int) {
	var kept []map[string]any
	for _, r := range recs {
		ok := true
		for i := range lq.filters {
			if !lq.filters[i].match(r) {
				ok = false
				break
			}
		}
		if ok {
			kept = append(kept, r)
		}
	}
	keyOf := func(r map[string]any) string {
		if v := leaves(r, strings.Split(res.sortKey, ".")); len(v) > 0 {
			return scalarString(v[0])
		}
		return ""
	}
	sort.SliceStable(kept, func(i, j int) bool {
		for _, k := range lq.orderBy {
			a, b := leaves(kept[i], k.path), leaves(kept[j], k.path)
			var as, bs string
			if len(a) > 0 {
				as = scalarString(a[0])
			}
			if len(b) > 0 {
				bs = scalarString(b[0])
			}
			if c := compare(as, bs); c != 0 {
				return (c < 0) != k.desc
			}
		}
		return compare(keyOf(kept[i]), keyOf(kept[j])) < 0
	})
	if lq.start != "" && len(lq.orderBy) == 0 {
		i := sort.Search(len(kept), func(i int) bool { return compare(keyOf(kept[i]), lq.start) >= 0 })
		kept = kept[i:]
	}
	if lq.offset > 0 {
		kept = kept[min(lq.offset, len(kept)):]
	}
	if len(kept) > lq.max {
		next = url.Values{}
		if len(lq.orderBy) == 0 {
			next.Set(res.cursorParam(), keyOf(kept[lq.max]))
		} else {
			next.Set("offset", strconv.Itoa(lq.offset+lq.max))
		}
		kept = kept[:lq.max]
	}
	for _, r := range kept {
		page = append(page, project(r, lq.sel, false).(map[string]any))
	}
	return page, next, len(page)
}
