package ontapsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// decodeBody parses a request body. ONTAP bodies are JSON objects; anything
// else is a 400 with an ONTAP error, never a panic.
func decodeBody(data []byte) (map[string]any, *apiError) {
	if len(bytes.TrimSpace(data)) == 0 {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errInvalid(codeInvalidJSON, "", "Invalid JSON input: %s.", jsonErrText(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errInvalid(codeInvalidJSON, "", "Invalid JSON input: unexpected data after the top-level value.")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errInvalid(codeInvalidJSONType, "", "Invalid JSON input: expected an object.")
	}
	return m, nil
}

func jsonErrText(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return se.Error() + " at offset " + strconv.FormatInt(se.Offset, 10)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "unexpected end of input"
	}
	return err.Error()
}

// checkBodyKeys rejects body fields that the operation does not take:
// 262196 for a real field that cannot be set here, 262179 for an unknown one.
func checkBodyKeys(m map[string]any, settable, readable schema) *apiError {
	var bad *apiError
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if bad != nil {
			return
		}
		switch t := v.(type) {
		case map[string]any:
			if len(t) == 0 && prefix != "" {
				if !settable.known(prefix) {
					bad = fieldNotSettable(prefix, readable)
				}
				return
			}
			for k, c := range t {
				if k == "_links" {
					continue
				}
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				walk(p, c)
			}
		case []any:
			objects := false
			for _, e := range t {
				if _, ok := e.(map[string]any); ok {
					objects = true
					walk(prefix, e)
				}
			}
			if !objects && !settable[prefix] && !settable.known(prefix) {
				bad = fieldNotSettable(prefix, readable)
			}
		default:
			if !settable[prefix] {
				bad = fieldNotSettable(prefix, readable)
			}
		}
	}
	walk("", m)
	return bad
}

func fieldNotSettable(p string, readable schema) *apiError {
	if readable.known(p) {
		return errInvalid(codeCannotSetField, p, "Field %q cannot be set in this operation.", p)
	}
	return errInvalid(codeUnexpectedArgument, p, "Unexpected argument %q.", p)
}

// bodyReader reads typed values at dotted paths and keeps the first error,
// so handlers read every field and check once.
type bodyReader struct {
	m   map[string]any
	err *apiError
}

func (b *bodyReader) lookup(path string) (any, bool) {
	var cur any = b.m
	for _, k := range strings.Split(path, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = mm[k]; !ok {
			return nil, false
		}
	}
	return cur, cur != nil
}

func (b *bodyReader) has(path string) bool {
	_, ok := b.lookup(path)
	return ok
}

func (b *bodyReader) fail(path string, v any, why string) {
	if b.err == nil {
		b.err = errInvalid(codeInvalidValue, path, "The value %q is invalid for field %q (%s).", scalarString(v), path, why)
	}
}

func (b *bodyReader) str(path string) (string, bool) {
	v, ok := b.lookup(path)
	if !ok {
		return "", false
	}
	s, isStr := v.(string)
	if !isStr {
		b.fail(path, v, "expected a string")
		return "", false
	}
	return s, true
}

func (b *bodyReader) integer(path string) (int64, bool) {
	v, ok := b.lookup(path)
	if !ok {
		return 0, false
	}
	var s string
	switch t := v.(type) {
	case json.Number:
		s = t.String()
	case string:
		s = t
	default:
		b.fail(path, v, "expected an integer")
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		b.fail(path, v, "expected an integer")
		return 0, false
	}
	return n, true
}

var sizeRE = regexp.MustCompile(`^(?i)(\d+)\s*([KMGTP]?)B?$`)

// size reads a size: bytes as a number, or a string with a 1024-based
// KB/MB/GB/TB/PB suffix ("300G", "1GB", "20971520").
func (b *bodyReader) size(path string) (int64, bool) {
	v, ok := b.lookup(path)
	if !ok {
		return 0, false
	}
	n, err := parseSize(v)
	if err != nil {
		b.fail(path, v, err.Error())
		return 0, false
	}
	return n, true
}

func parseSize(v any) (int64, error) {
	var s string
	switch t := v.(type) {
	case json.Number:
		s = t.String()
	case string:
		s = strings.TrimSpace(t)
	default:
		return 0, errors.New("expected a size")
	}
	if strings.HasPrefix(s, "-") {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, nil // negative: let the caller report its own code
		}
	}
	m := sizeRE.FindStringSubmatch(s)
	if m == nil {
		return 0, errors.New("expected a size in bytes or with a KB, MB, GB, TB or PB suffix")
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, errors.New("size out of range")
	}
	shift := map[string]uint{"": 0, "K": 10, "M": 20, "G": 30, "T": 40, "P": 50}[strings.ToUpper(m[2])]
	if shift > 0 && n > (int64(1)<<(63-shift))-1 {
		return 0, errors.New("size out of range")
	}
	return n << shift, nil
}

// boolean accepts JSON booleans and the strings "true"/"false".
func (b *bodyReader) boolean(path string) (bool, bool) {
	v, ok := b.lookup(path)
	if !ok {
		return false, false
	}
	switch t := v.(type) {
	case bool:
		return t, true
	case string:
		switch strings.ToLower(t) {
		case "true":
			return true, true
		case "false":
			return false, true
		}
	}
	b.fail(path, v, "expected true or false")
	return false, false
}

// enum reads a string, case-insensitively, from allowed; it returns the
// lower-case form ONTAP reports.
func (b *bodyReader) enum(path string, allowed ...string) (string, bool) {
	s, ok := b.str(path)
	if !ok {
		return "", false
	}
	l := strings.ToLower(s)
	for _, a := range allowed {
		if l == a {
			return l, true
		}
	}
	b.fail(path, s, "one of "+strings.Join(allowed, ", "))
	return "", false
}

// strList reads an array of strings (a single string is a one-element list).
func (b *bodyReader) strList(path string) ([]string, bool) {
	v, ok := b.lookup(path)
	if !ok {
		return nil, false
	}
	switch t := v.(type) {
	case string:
		return []string{t}, true
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				b.fail(path, e, "expected a list of strings")
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	b.fail(path, v, "expected a list of strings")
	return nil, false
}

// objects reads an array of objects.
func (b *bodyReader) objects(path string) ([]*bodyReader, bool) {
	v, ok := b.lookup(path)
	if !ok {
		return nil, false
	}
	arr, isArr := v.([]any)
	if !isArr {
		b.fail(path, v, "expected a list of objects")
		return nil, false
	}
	out := make([]*bodyReader, 0, len(arr))
	for _, e := range arr {
		m, ok := e.(map[string]any)
		if !ok {
			b.fail(path, e, "expected a list of objects")
			return nil, false
		}
		out = append(out, &bodyReader{m: m})
	}
	return out, true
}

// sub propagates a nested reader's error.
func (b *bodyReader) sub(r *bodyReader) {
	if b.err == nil && r.err != nil {
		b.err = r.err
	}
}
