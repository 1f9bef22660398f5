package readme

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// block is an example block of a Markdown file: the fenced code between
//
//	<!-- example: NAME -->
//	```console
//	...
//	```
//	<!-- /example -->
//
// Blank lines may separate the markers from the fences.
type block struct {
	file string
	name string
	line int // of the opening marker, from 1
	// fence opens and closes the code: three backticks or more.
	fence string
	// body is the code, every line ending in "\n".
	body string
	// first and end delimit the body in the file's lines, from 0:
	// lines[first:end].
	first, end int
}

var (
	openMarker  = regexp.MustCompile(`^<!--\s*example:\s*(\S*)\s*-->$`)
	closeMarker = regexp.MustCompile(`^<!--\s*/example\s*-->$`)
	exampleName = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	fenceRun    = regexp.MustCompile("^(```+)")
)

// parseBlocks finds the example blocks of a Markdown file's text. file
// names it in errors.
func parseBlocks(file, text string) ([]block, error) {
	lines := strings.Split(text, "\n")
	var blocks []block
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if closeMarker.MatchString(l) {
			return nil, fmt.Errorf("%s:%d: <!-- /example --> closes no example", file, i+1)
		}
		m := openMarker.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		b := block{file: file, name: m[1], line: i + 1}
		if !exampleName.MatchString(b.name) {
			return nil, fmt.Errorf("%s:%d: example name %q: want lower-case letters, digits and dashes", file, i+1, b.name)
		}
		j := skipBlank(lines, i+1)
		f := ""
		if j < len(lines) {
			f = fenceRun.FindString(strings.TrimSpace(lines[j]))
		}
		if f == "" {
			return nil, fmt.Errorf("%s:%d: example %s: the marker must be followed by a ``` code block", file, i+1, b.name)
		}
		k := j + 1
		for k < len(lines) && strings.TrimRight(lines[k], " \t") != f {
			k++
		}
		if k == len(lines) {
			return nil, fmt.Errorf("%s:%d: example %s: the code block is not closed", file, j+1, b.name)
		}
		e := skipBlank(lines, k+1)
		if e == len(lines) || !closeMarker.MatchString(strings.TrimSpace(lines[e])) {
			return nil, fmt.Errorf("%s:%d: example %s: <!-- /example --> must follow its code block", file, k+1, b.name)
		}
		b.fence, b.first, b.end = f, j+1, k
		if k > j+1 {
			b.body = strings.Join(lines[j+1:k], "\n") + "\n"
		}
		blocks = append(blocks, b)
		i = e
	}
	return blocks, nil
}

func skipBlank(lines []string, i int) int {
	for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
		i++
	}
	return i
}

// replaceBodies returns text with the bodies of the named examples
// replaced, each line stripped of trailing blanks. A body must not contain
// its block's closing fence.
func replaceBodies(file, text string, bodies map[string]string) (string, error) {
	blocks, err := parseBlocks(file, text)
	if err != nil {
		return "", err
	}
	lines := strings.Split(text, "\n")
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		body, ok := bodies[b.name]
		if !ok {
			continue
		}
		var repl []string
		if body = strings.TrimRight(body, "\n"); body != "" {
			repl = strings.Split(body, "\n")
		}
		for n, l := range repl {
			repl[n] = strings.TrimRight(l, " \t\r")
			if strings.HasPrefix(repl[n], b.fence) {
				return "", fmt.Errorf("%s:%d: example %s: line %d of the new body would close the code block", file, b.line, b.name, n+1)
			}
		}
		lines = slices.Concat(lines[:b.first], repl, lines[b.end:])
	}
	return strings.Join(lines, "\n"), nil
}

func TestParseBlocks(t *testing.T) {
	const doc = "# Title\n" +
		"<!-- example: one -->\n" +
		"```console\n" +
		"$ bin/tenure sim\n" +
		"report\n" +
		"```\n" +
		"<!-- /example -->\n" +
		"text\n" +
		"<!--example:two-->\n" +
		"\n" +
		"````\n" +
		"```\n" +
		"````\n" +
		"\n" +
		"<!-- /example -->\n"
	blocks, err := parseBlocks("doc.md", doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 {
		t.Fatalf("found %d blocks, want 2: %+v", len(blocks), blocks)
	}
	if b := blocks[0]; b.name != "one" || b.line != 2 || b.fence != "```" || b.body != "$ bin/tenure sim\nreport\n" {
		t.Errorf("first block: %+v", b)
	}
	if b := blocks[1]; b.name != "two" || b.line != 9 || b.fence != "````" || b.body != "```\n" {
		t.Errorf("second block: %+v", b)
	}

	got, err := replaceBodies("doc.md", doc, map[string]string{"one": "$ new  \nlines\t\n\n", "two": ""})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(strings.Replace(doc, "$ bin/tenure sim\nreport\n", "$ new\nlines\n", 1), "````\n```\n````", "````\n````", 1)
	if got != want {
		t.Errorf("replaced:\n%s\nwant:\n%s", got, want)
	}
	if _, err := replaceBodies("doc.md", doc, map[string]string{"one": "```\n"}); err == nil || !strings.Contains(err.Error(), "would close the code block") {
		t.Errorf("a body holding its fence: err %v", err)
	}
}

func TestParseBlocksRejects(t *testing.T) {
	for _, tt := range []struct {
		name, doc, want string
	}{
		{"no code block", "<!-- example: a -->\ntext\n<!-- /example -->\n", "doc.md:1: example a: the marker must be followed by a ``` code block"},
		{"unclosed code", "<!-- example: a -->\n```\nx\n", "doc.md:2: example a: the code block is not closed"},
		{"no end marker", "<!-- example: a -->\n```\nx\n```\ntext\n", "doc.md:4: example a: <!-- /example --> must follow its code block"},
		{"stray end marker", "text\n<!-- /example -->\n", "doc.md:2: <!-- /example --> closes no example"},
		{"bad name", "<!-- example: Sim_1 -->\n```\n```\n<!-- /example -->\n", `doc.md:1: example name "Sim_1"`},
		{"no name", "<!-- example: -->\n```\n```\n<!-- /example -->\n", `doc.md:1: example name ""`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseBlocks("doc.md", tt.doc)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
		})
	}
}
