// Command tridentkeys lists the backend configuration keys Trident's
// ontap-nas and ontap-san drivers decode: every JSON key path of
// OntapStorageDriverConfig in Trident's storage_drivers/types.go, read with
// go/ast, following Go's encoding/json rules (embedded structs without a
// tag promote their fields; a tag names the key; "-" hides a field).
//
// It is kept under testdata so that `go build ./...` leaves it alone; see
// ../README.md for how to run it.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

func main() {
	src := flag.String("types", "-", "Trident's storage_drivers/types.go (- reads stdin)")
	root := flag.String("root", "OntapStorageDriverConfig", "the struct a backend config decodes into")
	flag.Parse()
	data, err := read(*src)
	if err == nil {
		var keys []string
		keys, err = keyPaths(data, *root)
		for _, k := range keys {
			fmt.Println(k)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tridentkeys:", err)
		os.Exit(1)
	}
}

func read(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(path)
}

// keyPaths returns the sorted key paths of root: "a", "a.b" for a nested
// object, "a[].b" for the objects of a list.
func keyPaths(src []byte, root string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "types.go", src, 0)
	if err != nil {
		return nil, err
	}
	structs := map[string]*ast.StructType{}
	ast.Inspect(f, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok {
			if st, ok := ts.Type.(*ast.StructType); ok {
				structs[ts.Name.Name] = st
			}
		}
		return true
	})
	w := walker{structs: structs, seen: map[string]bool{}}
	if structs[root] == nil {
		return nil, fmt.Errorf("no struct %s", root)
	}
	w.walk(root, "")
	sort.Strings(w.keys)
	return w.keys, nil
}

type walker struct {
	structs map[string]*ast.StructType
	keys    []string
	seen    map[string]bool
}

func (w *walker) add(key string) {
	if !w.seen[key] {
		w.seen[key] = true
		w.keys = append(w.keys, key)
	}
}

// walk adds the keys of struct name under prefix.
func (w *walker) walk(name, prefix string) {
	for _, field := range w.structs[name].Fields.List {
		tag := jsonTag(field)
		if tag == "-" {
			continue
		}
		typeName, list := elemType(field.Type)
		if len(field.Names) == 0 && tag == "" {
			// Embedded without a key: its fields are promoted.
			w.walk(typeName, prefix)
			continue
		}
		for _, n := range field.Names {
			if !n.IsExported() {
				continue
			}
			key := tag
			if key == "" {
				key = n.Name
			}
			w.field(prefix+key, typeName, list)
		}
		if len(field.Names) == 0 {
			w.field(prefix+tag, typeName, list)
		}
	}
}

// field adds key and, for a struct of the file, its keys below it.
func (w *walker) field(key, typeName string, list bool) {
	w.add(key)
	if _, ok := w.structs[typeName]; !ok {
		return
	}
	if list {
		key += "[]"
	}
	w.walk(typeName, key+".")
}

// elemType names the struct a field holds (through pointers and one
// slice level), and whether it is a list of it.
func elemType(e ast.Expr) (string, bool) {
	list := false
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.ArrayType:
			list, e = true, t.Elt
		case *ast.Ident:
			return t.Name, list
		default:
			return "", list
		}
	}
}

// jsonTag returns the key name of a field's json tag ("" when none).
func jsonTag(f *ast.Field) string {
	if f.Tag == nil {
		return ""
	}
	raw, err := strconv.Unquote(f.Tag.Value)
	if err != nil {
		return ""
	}
	name, _, _ := strings.Cut(reflect.StructTag(raw).Get("json"), ",")
	return name
}
