// Command gen derives the field paths of the ONTAP REST resources this
// project touches from the Go models that go-swagger generated from
// ONTAP's published REST API definition, as Trident's repository carries
// them (storage_drivers/ontap/api/rest/models), and writes them as the
// test data of test/conformance:
//
//	go run ./test/conformance/gen -git <trident clone> -ref v26.06.0 \
//		>test/conformance/testdata/ontap-fields.txt
//	go run ./test/conformance/gen -dir <models directory> >...
//
// Each line is "<resource> <path> <kind>", path in ONTAP's dotted form as
// `fields=` and query filters take it (arrays are transparent: an igroup's
// initiators.name), kind what its JSON value is: object, objects (an array
// of objects), scalar or scalars (an array of scalars). "_links" is left
// out. Only the models are read, never Trident's code.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

const modelsDir = "storage_drivers/ontap/api/rest/models"

// roots maps each resource name the conformance test uses to its model.
var roots = map[string]string{
	"aggregate":              "Aggregate",
	"cluster":                "Cluster",
	"cluster-node":           "Node",
	"consistency-group":      "ConsistencyGroup",
	"consistency-group-snap": "ConsistencyGroupSnapshot",
	"export-policy":          "ExportPolicy",
	"export-rule":            "ExportRule",
	"igroup":                 "Igroup",
	"igroup-initiator":       "IgroupInitiator",
	"ip-interface":           "IPInterface",
	"iscsi-credentials":      "IscsiCredentials",
	"iscsi-service":          "IscsiService",
	"job":                    "Job",
	"lun":                    "Lun",
	"lun-attribute":          "LunAttribute",
	"lun-map":                "LunMap",
	"lun-map-reporting-node": "LunMapReportingNode",
	"qos-policy":             "QosPolicy",
	"qtree":                  "Qtree",
	"quota-rule":             "QuotaRule",
	"snapshot":               "Snapshot",
	"snapshot-policy":        "SnapshotPolicy",
	"svm":                    "Svm",
	"volume":                 "Volume",
}

// maxDepth bounds the paths: ONTAP's deepest fields the project could use
// are well within it, and references between resources recur.
const maxDepth = 8

func main() {
	gitDir := flag.String("git", "", "a clone of Trident's repository (bare or not)")
	ref := flag.String("ref", "v26.06.0", "the tag or commit of -git to read")
	dir := flag.String("dir", "", "a directory holding the model files instead of -git")
	flag.Parse()
	files, source, err := readModels(*gitDir, *ref, *dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	types, err := parseModels(files)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	var out bytes.Buffer
	fmt.Fprintf(&out, "# ONTAP REST field paths, derived by test/conformance/gen from the go-swagger\n# models of ONTAP's REST API definition in %s.\n# Regenerate: see test/conformance/gen. Lines: <resource> <path> <kind>.\n", source)
	names := make([]string, 0, len(roots))
	for r := range roots {
		names = append(names, r)
	}
	sort.Strings(names)
	for _, r := range names {
		if types[roots[r]] == nil {
			fmt.Fprintf(os.Stderr, "gen: no model %s for %s\n", roots[r], r)
			os.Exit(1)
		}
		paths := map[string]string{}
		walk(types, roots[r], "", map[string]bool{}, paths)
		sorted := make([]string, 0, len(paths))
		for p := range paths {
			sorted = append(sorted, p)
		}
		sort.Strings(sorted)
		for _, p := range sorted {
			fmt.Fprintf(&out, "%s %s %s\n", r, p, paths[p])
		}
	}
	os.Stdout.Write(out.Bytes())
}

// readModels returns the model files' contents by name.
func readModels(gitDir, ref, dir string) (map[string][]byte, string, error) {
	files := map[string][]byte{}
	if dir != "" {
		names, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(names) == 0 {
			return nil, "", fmt.Errorf("no model files in %s (%v)", dir, err)
		}
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err != nil {
				return nil, "", err
			}
			files[filepath.Base(n)] = b
		}
		return files, dir, nil
	}
	if gitDir == "" {
		return nil, "", fmt.Errorf("give -git or -dir")
	}
	cmd := exec.Command("git", "-C", gitDir, "archive", "--format=tar", ref, modelsDir)
	var tarball, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &tarball, &stderr
	if err := cmd.Run(); err != nil {
		return nil, "", fmt.Errorf("git archive %s: %v: %s", ref, err, stderr.String())
	}
	tr := tar.NewReader(&tarball)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, "", err
		}
		if strings.HasSuffix(h.Name, ".go") && !strings.HasSuffix(h.Name, "_test.go") {
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, "", err
			}
			files[filepath.Base(h.Name)] = b
		}
	}
	return files, "NetApp/trident " + ref + ":" + modelsDir, nil
}

// field is one JSON member of a model struct: its name, the model type it
// holds ("" for a scalar), arrays looked through, and whether it is an
// array.
type field struct {
	name  string
	typ   string
	array bool
}

// model is a struct type: its fields, and the types it embeds (go-swagger
// renders allOf as embedding).
type model struct {
	fields []field
	embeds []string
}

// parseModels returns the model structs by name. A field whose type is a
// named slice type (go-swagger's "…ArrayInline") is made an array of its
// element type.
func parseModels(files map[string][]byte) (map[string]*model, error) {
	fset := token.NewFileSet()
	types := map[string]*model{}
	slices := map[string]string{} // named slice type -> element type
	for name, src := range files {
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				switch t := ts.Type.(type) {
				case *ast.StructType:
					types[ts.Name.Name] = structModel(t)
				case *ast.ArrayType:
					slices[ts.Name.Name] = typeName(t.Elt)
				}
			}
		}
	}
	for _, m := range types {
		for i, f := range m.fields {
			if elem, ok := slices[f.typ]; ok {
				m.fields[i].typ, m.fields[i].array = elem, true
			}
		}
	}
	return types, nil
}

func structModel(st *ast.StructType) *model {
	m := &model{}
	for _, f := range st.Fields.List {
		typ := typeName(f.Type)
		if len(f.Names) == 0 {
			m.embeds = append(m.embeds, typ)
			continue
		}
		name := jsonName(f)
		if name == "" || name == "_links" {
			continue
		}
		m.fields = append(m.fields, field{name: name, typ: typ, array: isArray(f.Type)})
	}
	return m
}

// jsonName is a field's JSON name from its tag; "" when it has none or "-".
func jsonName(f *ast.Field) string {
	if f.Tag == nil {
		return ""
	}
	tag, err := strconv.Unquote(f.Tag.Value)
	if err != nil {
		return ""
	}
	name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// typeName is the local named type an expression refers to, through
// pointers and slices; "" for anything else (scalars, other packages).
func typeName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return typeName(t.X)
	case *ast.ArrayType:
		return typeName(t.Elt)
	case *ast.Ident:
		return t.Name
	}
	return ""
}

func isArray(e ast.Expr) bool {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	_, ok := e.(*ast.ArrayType)
	return ok
}

// walk adds the paths below type name, prefixed, to paths. onPath holds the
// types on the way down: a type met again is not entered twice.
func walk(types map[string]*model, name, prefix string, onPath map[string]bool, paths map[string]string) {
	m := types[name]
	if m == nil || onPath[name] || strings.Count(prefix, ".") >= maxDepth {
		return
	}
	onPath[name] = true
	defer delete(onPath, name)
	for _, e := range m.embeds {
		walk(types, e, prefix, onPath, paths)
	}
	for _, f := range m.fields {
		p := prefix + f.name
		kind := "scalar"
		if types[f.typ] != nil {
			kind = "object"
			walk(types, f.typ, p+".", onPath, paths)
		}
		if f.array {
			kind += "s"
		}
		paths[p] = kind
	}
}
