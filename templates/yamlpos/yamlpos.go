// Package yamlpos decodes YAML strictly and says where a problem is: an
// unknown key or a value of the wrong type is reported with its key path
// ("agents[1].preset") and line, and every key's line is recorded so that
// later validation can point at it too. mozi's configuration and toolchain
// templates use it.
package yamlpos

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Positions maps a key path ("agents[1].preset") to its line in the file.
type Positions map[string]int

// Line returns the line of key, or of its closest ancestor with one (0:
// unknown).
func (p Positions) Line(key string) int {
	for k := key; k != ""; k = parentKey(k) {
		if line, ok := p[k]; ok {
			return line
		}
	}
	return 0
}

func parentKey(k string) string {
	if i := strings.LastIndexAny(k, ".["); i > 0 {
		return k[:i]
	}
	return ""
}

// Error is a problem at a line of the document.
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("%d: %s", e.Line, e.Msg) }

// Decode parses data into out (a pointer to a struct) strictly: unknown
// keys and mistyped values are errors naming source, line and key
// ("mozi.yaml:12: unknown field \"agnets\""). It returns where every key is.
func Decode(source string, data []byte, out any) (Positions, error) {
	pos := Positions{}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return pos, errors.New(syntaxError(source, data, err))
	}
	if len(doc.Content) == 0 {
		return pos, nil // an empty document leaves out as it is
	}
	if err := checkNode(doc.Content[0], reflect.TypeOf(out).Elem(), "", pos); err != nil {
		var le *Error
		if errors.As(err, &le) {
			return pos, fmt.Errorf("%s:%d: %s", source, le.Line, le.Msg)
		}
		return pos, fmt.Errorf("%s: %w", source, err)
	}
	if err := doc.Content[0].Decode(out); err != nil {
		return pos, errors.New(SyntaxError(source, err))
	}
	return pos, nil
}

// yamlLineRE reads "yaml: line 3: mapping values are not allowed".
var yamlLineRE = regexp.MustCompile(`^yaml: (?:unmarshal errors:\s*)?line (\d+): (.*)$`)

// syntaxError is SyntaxError with the line where the document stops
// parsing: yaml.v3 names the line where the enclosing mapping or sequence
// began (an unclosed "[" on line 3 of an agent's entry is reported on the
// entry's first line, a tab on the line before it). The first prefix of
// the document, by whole lines, that fails with the same complaint ends
// at the faulty line.
func syntaxError(source string, data []byte, err error) string {
	msg := SyntaxError(source, err)
	m := yamlLineRE.FindStringSubmatch(strings.SplitN(strings.TrimSpace(err.Error()), "\n", 2)[0])
	if m == nil {
		return msg
	}
	reported, _ := strconv.Atoi(m[1])
	lines := strings.SplitAfter(string(data), "\n")
	for n := reported; n <= len(lines); n++ {
		var doc yaml.Node
		perr := yaml.Unmarshal([]byte(strings.Join(lines[:n], "")), &doc)
		if perr == nil {
			continue
		}
		pm := yamlLineRE.FindStringSubmatch(strings.SplitN(strings.TrimSpace(perr.Error()), "\n", 2)[0])
		if pm != nil && pm[2] == m[2] {
			if n != reported {
				return fmt.Sprintf("%s:%d: %s", source, n, m[2])
			}
			return msg
		}
	}
	return msg
}

// SyntaxError turns yaml.v3's "yaml: line 3: …" into "source:3: …".
func SyntaxError(source string, err error) string {
	msg := strings.TrimSpace(err.Error())
	if m := yamlLineRE.FindStringSubmatch(strings.SplitN(msg, "\n", 2)[0]); m != nil {
		return fmt.Sprintf("%s:%s: %s", source, m[1], m[2])
	}
	msg = strings.ReplaceAll(strings.TrimPrefix(msg, "yaml: "), "\n", " ")
	return fmt.Sprintf("%s: %s", source, msg)
}

// checkNode walks a YAML node against the Go type it will be decoded into,
// so that an unknown key or a value of the wrong type is reported with its
// key path and line, before yaml.v3's own, less precise, errors.
func checkNode(n *yaml.Node, t reflect.Type, path string, pos Positions) error {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if isNull(n) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return posErr(n, path, "want a mapping of keys, got %s", kindName(n))
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			if key.Tag == "!!merge" {
				// <<: *anchor (or a list of them) merges mappings of the
				// same shape into this one.
				merged := []*yaml.Node{val}
				if val.Kind == yaml.SequenceNode {
					merged = val.Content
				}
				for _, m := range merged {
					if err := checkNode(m, t, path, pos); err != nil {
						return err
					}
				}
				continue
			}
			field, ok := fields[key.Value]
			if !ok {
				return unknownField(key, path, fields)
			}
			child := join(path, key.Value)
			pos[child] = key.Line
			if err := checkNode(val, field.Type, child, pos); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return posErr(n, path, "want a list, got %s", kindName(n))
		}
		for i, el := range n.Content {
			child := fmt.Sprintf("%s[%d]", path, i)
			pos[child] = el.Line
			if err := checkNode(el, t.Elem(), child, pos); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return posErr(n, path, "want a mapping, got %s", kindName(n))
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			child := join(path, key.Value)
			pos[child] = key.Line
			if err := checkNode(val, t.Elem(), child, pos); err != nil {
				return err
			}
		}
	default:
		if n.Kind != yaml.ScalarNode {
			return posErr(n, path, "want %s, got %s", scalarName(t), kindName(n))
		}
		v := reflect.New(t).Interface()
		if err := n.Decode(v); err != nil {
			if _, own := v.(yaml.Unmarshaler); own {
				return posErr(n, path, "%v", err) // the type says what it wants
			}
			return posErr(n, path, "invalid value %q: want %s", n.Value, scalarName(t))
		}
	}
	return nil
}

func posErr(n *yaml.Node, path, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if path != "" {
		msg = path + ": " + msg
	}
	return &Error{Line: n.Line, Msg: msg}
}

func unknownField(key *yaml.Node, path string, fields map[string]reflect.StructField) error {
	msg := fmt.Sprintf("unknown field %q", key.Value)
	if path != "" {
		msg = fmt.Sprintf("unknown field %q in %s", key.Value, path)
	}
	if s := suggest(key.Value, fields); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return &Error{Line: key.Line, Msg: msg}
}

// suggest returns the known field closest to name, if it is close enough to
// be a typo.
func suggest(name string, fields map[string]reflect.StructField) string {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	best, bestDist := "", 3
	for _, k := range names {
		if d := editDistance(name, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func yamlFields(t reflect.Type) map[string]reflect.StructField {
	out := make(map[string]reflect.StructField, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f
	}
	return out
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

var durationType = reflect.TypeOf(time.Duration(0))

func scalarName(t reflect.Type) string {
	if t == durationType {
		return "a duration such as 30s or 5m"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	}
	return t.String()
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
