// Package nametemplate is Trident's defaults.nameTemplate: a Go template
// that names the ONTAP volume of a new volume after its claim, its backend
// and its pool's labels (docs/design/trident-compat.md §4.1).
//
// Trident 26.06 renders it with html/template over its volume config, the
// backend config and the pool's labels, then keeps letters, digits and
// '_' only, squeezes runs of '_' and trims them from both ends. A template
// whose output cannot start an ONTAP volume name, or whose execution
// fails, names the volume by the default rule (storagePrefix + PV name). A
// template that does not use .volume.Name gets "_{{slice .volume.Name 4
// 9}}" appended (five hex digits of the claim's UID), so two claims of the
// same name in one namespace do not collide. This package renders the
// same way, with two differences: a template that uses a claim value the
// request does not carry fails with *MissingError instead of rendering it
// empty, and only the fields listed in Fields exist.
package nametemplate

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"regexp"
	"slices"
	"strings"
	"text/template/parse"
)

// Fields are the values a template can use, by the names of Trident's
// VolumeConfig and backend config fields. Labels are .labels.<key>.
var Fields = map[string][]string{
	"volume": {"Name", "RequestName", "Namespace", "StorageClass", "Size", "Protocol", "VolumeMode"},
	"config": {"StoragePrefix", "BackendName", "StorageDriverName", "SVM", "ManagementLIF", "DataLIF"},
}

// claimFields are the .volume fields that come from the claim, which a
// request may lack.
var claimFields = []string{"RequestName", "Namespace", "StorageClass"}

// uniqueSuffix is what Trident appends to a template that does not use the
// volume's name.
const uniqueSuffix = "_{{slice .volume.Name 4 9}}"

// usesNameRE is Trident's test of whether a template uses the volume's
// name: an action that ends with .volume.Name, or with .volume.Name and
// arguments other than letters (a slice of it).
var usesNameRE = regexp.MustCompile(`\{+.*\.volume\.Name[^{a-z]*\}+`)

var (
	disallowedRE = regexp.MustCompile(`[^A-Za-z0-9_]`)
	underscoreRE = regexp.MustCompile(`_+`)
	startRE      = regexp.MustCompile(`^[A-Za-z_]`)
)

// Template is a parsed nameTemplate.
type Template struct {
	source string // as configured
	text   string // with Trident's uniqueness suffix
	tmpl   *template.Template
	// uses are the "volume.X", "config.X" and "labels.X" paths the
	// template refers to from its top level.
	uses []string
}

// Parse parses a nameTemplate as Trident does at backend start: a syntax
// error is the config's error.
func Parse(source string) (*Template, error) {
	text := source
	if !usesNameRE.MatchString(source) {
		text += uniqueSuffix
	}
	tmpl, err := template.New("nameTemplate").Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, err
	}
	t := &Template{source: source, text: text, tmpl: tmpl}
	walk(tmpl.Tree.Root, &t.uses)
	slices.Sort(t.uses)
	t.uses = slices.Compact(t.uses)
	return t, nil
}

// String is the template as configured.
func (t *Template) String() string { return t.source }

// Effective is the template as rendered: with the uniqueness suffix when
// Trident adds it.
func (t *Template) Effective() string { return t.text }

// Unknown lists the fields the template uses that do not exist (Fields);
// rendering it fails and names the volume by the default rule, as in
// Trident, where such a field fails execution.
func (t *Template) Unknown() []string {
	var out []string
	for _, u := range t.uses {
		root, field, _ := strings.Cut(u, ".")
		if root == "labels" {
			continue
		}
		if names, ok := Fields[root]; !ok || !slices.Contains(names, field) {
			out = append(out, "."+u)
		}
	}
	return out
}

// walk collects the field paths used from the template's top level.
// Inside with and range the dot changes; fields used there are not
// collected, and a missing one fails execution instead.
func walk(n parse.Node, uses *[]string) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			walk(c, uses)
		}
	case *parse.ActionNode:
		walk(n.Pipe, uses)
	case *parse.PipeNode:
		if n == nil {
			return
		}
		for _, c := range n.Cmds {
			walk(c, uses)
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			walk(a, uses)
		}
	case *parse.FieldNode:
		if len(n.Ident) >= 2 {
			*uses = append(*uses, n.Ident[0]+"."+n.Ident[1])
		} else if len(n.Ident) == 1 {
			*uses = append(*uses, n.Ident[0])
		}
	case *parse.IfNode:
		walk(n.Pipe, uses)
		walk(n.List, uses)
		walk(n.ElseList, uses)
	case *parse.WithNode:
		walk(n.Pipe, uses)
		walk(n.ElseList, uses)
	case *parse.RangeNode:
		walk(n.Pipe, uses)
		walk(n.ElseList, uses)
	}
}

// Data is what a template renders: Volume and Config keyed by the names in
// Fields ("" or absent: unknown), and the pool's labels, whose values may
// be templates themselves (rendered over Volume and Config, as Trident's
// pool labels are).
type Data struct {
	Volume map[string]string
	Config map[string]string
	Labels map[string]string
}

// MissingError is a template that uses claim values the request lacks.
type MissingError struct {
	Fields []string // e.g. ".volume.Namespace"
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("the nameTemplate uses %s, which the request does not carry", strings.Join(e.Fields, ", "))
}

// ErrNoName is a rendering that yields no usable ONTAP volume name (empty,
// or not starting with a letter or '_'), or whose execution fails; Trident
// then uses the default name.
var ErrNoName = errors.New("the nameTemplate gives no valid volume name")

// Render renders the template over d and makes the result an ONTAP volume
// name as Trident does. It fails with *MissingError (nothing else is
// tried) or an error wrapping ErrNoName (use the default name).
func (t *Template) Render(d Data) (string, error) {
	var missing []string
	for _, u := range t.uses {
		root, field, _ := strings.Cut(u, ".")
		if root == "volume" && slices.Contains(claimFields, field) && d.Volume[field] == "" {
			missing = append(missing, "."+u)
		}
	}
	if len(missing) > 0 {
		return "", &MissingError{Fields: missing}
	}
	config := make(map[string]any, len(d.Config))
	for k, v := range d.Config {
		config[k] = v
	}
	base := map[string]any{"volume": present(d.Volume), "config": config}
	labels := make(map[string]any, len(d.Labels))
	for k, v := range d.Labels {
		labels[k] = renderLabel(v, base)
	}
	for _, u := range t.uses {
		// A label the pool does not have renders empty, as in Trident,
		// whose labels are a map.
		if k, ok := strings.CutPrefix(u, "labels."); ok && labels[k] == nil {
			labels[k] = ""
		}
	}
	base["labels"] = labels
	var b bytes.Buffer
	if err := t.tmpl.Execute(&b, base); err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoName, err)
	}
	name := Sanitize(b.String())
	if !startRE.MatchString(name) {
		return "", fmt.Errorf("%w: it renders %q, which does not start with a letter or '_'", ErrNoName, name)
	}
	return name, nil
}

// Sanitize is Trident's cleaning of a rendered name: every character but
// letters, digits and '_' becomes '_', runs of '_' become one, and '_' is
// trimmed from both ends.
func Sanitize(s string) string {
	s = disallowedRE.ReplaceAllString(s, "_")
	s = underscoreRE.ReplaceAllString(s, "_")
	return strings.Trim(s, "_")
}

// present keeps the known values of the volume: the claim's are checked
// before execution; a field left out otherwise is one Trident's volume
// has not, which fails execution (missingkey=error) as in Trident.
func present(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

// renderLabel renders a label value that is a template; one that fails
// stays as written, as Trident keeps such a label.
func renderLabel(v string, data map[string]any) string {
	if !strings.Contains(v, "{{") {
		return v
	}
	tmpl, err := template.New("label").Option("missingkey=error").Parse(v)
	if err != nil {
		return v
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, data); err != nil {
		return v
	}
	return b.String()
}
