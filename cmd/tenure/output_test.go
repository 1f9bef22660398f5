package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
)

// shape is a JSON shape as docs/OPERATIONS.md documents it: checkShape
// holds a decoded document to it, key by key.
type shape interface {
	check(path string, v any) error
}

// obj is an object with exactly these keys.
type obj map[string]shape

// arrayOf is an array whose elements all have one shape.
type arrayOf struct{ elem shape }

// scalar is "string", "number" or "bool".
type scalar string

// orNull is a shape or null.
type orNull struct{ s shape }

const (
	str     scalar = "string"
	num     scalar = "number"
	boolean scalar = "bool"
)

func (o obj) check(path string, v any) error {
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: %T, want an object", path, v)
	}
	if got, want := slices.Sorted(maps.Keys(m)), slices.Sorted(maps.Keys(o)); !slices.Equal(got, want) {
		return fmt.Errorf("%s: keys %q, want %q", path, got, want)
	}
	for k, s := range o {
		if err := s.check(path+"."+k, m[k]); err != nil {
			return err
		}
	}
	return nil
}

func (a arrayOf) check(path string, v any) error {
	l, ok := v.([]any)
	if !ok {
		return fmt.Errorf("%s: %T, want an array", path, v)
	}
	for i, e := range l {
		if err := a.elem.check(fmt.Sprintf("%s[%d]", path, i), e); err != nil {
			return err
		}
	}
	return nil
}

func (s scalar) check(path string, v any) error {
	ok := false
	switch s {
	case str:
		_, ok = v.(string)
	case num:
		_, ok = v.(float64)
	case boolean:
		_, ok = v.(bool)
	}
	if !ok {
		return fmt.Errorf("%s: %T %v, want a %s", path, v, v, s)
	}
	return nil
}

func (n orNull) check(path string, v any) error {
	if v == nil {
		return nil
	}
	return n.s.check(path, v)
}

// checkShape decodes out as one JSON document, holds it to s, and decodes
// it again into into (if not nil), refusing unknown fields.
func checkShape(t *testing.T, what, out string, s shape, into any) {
	t.Helper()
	var v any
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: not JSON: %v\n%s", what, err, out)
	}
	if dec.More() {
		t.Fatalf("%s: more than one JSON document:\n%s", what, out)
	}
	if err := s.check(what, v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if into != nil {
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(into); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

func TestShapeCheck(t *testing.T) {
	s := obj{"a": str, "b": arrayOf{num}, "c": orNull{obj{"d": boolean}}}
	for _, tc := range []struct {
		doc  string
		want string // "" for no error
	}{
		{`{"a":"x","b":[1,2],"c":null}`, ""},
		{`{"a":"x","b":[],"c":{"d":true}}`, ""},
		{`{"a":"x","b":[1]}`, `keys ["a" "b"], want ["a" "b" "c"]`},
		{`{"a":"x","b":[1],"c":null,"e":1}`, "keys"},
		{`{"a":1,"b":[1],"c":null}`, "doc.a: float64 1, want a string"},
		{`{"a":"x","b":["1"],"c":null}`, "doc.b[0]"},
		{`{"a":"x","b":null,"c":null}`, "doc.b: <nil>, want an array"},
		{`{"a":"x","b":[],"c":{"d":"no"}}`, "doc.c.d"},
	} {
		var v any
		if err := json.Unmarshal([]byte(tc.doc), &v); err != nil {
			t.Fatal(err)
		}
		err := s.check("doc", v)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.doc, err, tc.want)
		}
	}
}

// TestOutputFlag: -o and --output set one value; the command line, in
// either form, wins over TENURE_OUTPUT, and -o has no variable of its own.
func TestOutputFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want outputFormat
	}{
		{nil, nil, outputTable},
		{[]string{"-o", "json"}, nil, outputJSON},
		{[]string{"--output=json"}, nil, outputJSON},
		{nil, map[string]string{"TENURE_OUTPUT": "json"}, outputJSON},
		{[]string{"-o", "table"}, map[string]string{"TENURE_OUTPUT": "json"}, outputTable},
		{[]string{"--output", "table"}, map[string]string{"TENURE_OUTPUT": "json"}, outputTable},
		{nil, map[string]string{"TENURE_O": "json"}, outputTable},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f := addOutputFlag(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := applyEnv(fs, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }); err != nil {
			t.Fatal(err)
		}
		if *f != tc.want {
			t.Errorf("%q with %v: %s, want %s", tc.args, tc.env, *f, tc.want)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addOutputFlag(fs)
	if err := fs.Parse([]string{"-o", "yaml"}); err == nil || !strings.Contains(err.Error(), "want table or json") {
		t.Errorf("-o yaml: %v", err)
	}
}

type testResult struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

func (r testResult) writeTable(w io.Writer) {
	fmt.Fprintf(w, "NAME\tCOUNT\n%s\t%d\n", r.Name, r.Count)
}

func TestWriteResult(t *testing.T) {
	var b bytes.Buffer
	if err := writeResult(&b, outputTable, testResult{"a-long-name", 3}); err != nil {
		t.Fatal(err)
	}
	if want := "NAME         COUNT\na-long-name  3\n"; b.String() != want {
		t.Errorf("table %q, want %q", b.String(), want)
	}
	b.Reset()
	if err := writeResult(&b, outputJSON, testResult{"a", 3}); err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"name\": \"a\",\n  \"count\": 3\n}\n"; b.String() != want {
		t.Errorf("json %q, want %q", b.String(), want)
	}
}
