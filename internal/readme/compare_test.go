package readme

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// compare returns "" if an example's body in the README and the output of
// a run of its script agree, and otherwise a diff of the lines it
// compared, "-" for the README's and "+" for the run's.
//
// Both sides lose trailing blanks on every line and trailing empty lines.
// The output of an example that is not live must then be identical. A live
// example's is compared by shape: its script's masks replace what varies
// between runs with "*", runs of blanks count as one space, and a run of
// consecutive lines that begin with a mask (rows of a table keyed by
// something that varies, such as member IDs, whose order follows it)
// compares as a set.
func compare(s script, readme, run string) string {
	a, b := comparable(s, readme), comparable(s, run)
	if slices.Equal(a, b) {
		return ""
	}
	return diff(a, b)
}

func comparable(s script, text string) []string {
	if s.live {
		text = mask(text, s)
	}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		l = strings.TrimRight(l, " \t\r")
		if s.live {
			l = strings.Join(strings.Fields(l), " ")
		}
		lines[i] = l
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if s.live {
		sortMaskedRuns(lines)
	}
	return lines
}

// mask applies the script's masks to text, in order.
func mask(text string, s script) string {
	for _, re := range s.masks {
		var b strings.Builder
		last := 0
		for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
			spans := m[:2] // the match, or else its groups
			if len(m) > 2 {
				spans = m[2:]
			}
			for g := 0; g < len(spans); g += 2 {
				// A group that took no part starts at -1; one nested
				// in a group already masked starts before last.
				if spans[g] < last {
					continue
				}
				b.WriteString(text[last:spans[g]])
				b.WriteString("*")
				last = spans[g+1]
			}
		}
		b.WriteString(text[last:])
		text = b.String()
	}
	return text
}

// sortMaskedRuns sorts every run of consecutive lines that begin with "*".
func sortMaskedRuns(lines []string) {
	for i := 0; i < len(lines); {
		j := i
		for j < len(lines) && strings.HasPrefix(lines[j], "*") {
			j++
		}
		if j > i {
			slices.Sort(lines[i:j])
			i = j
		} else {
			i++
		}
	}
}

// diff renders the differences between a and b line by line, from their
// longest common subsequence, with up to diffContext unchanged lines
// around each change.
func diff(a, b []string) string {
	const diffContext = 3
	n, m := len(a), len(b)
	// common[i][j] is the length of the longest common subsequence of
	// a[i:] and b[j:].
	common := make([][]int, n+1)
	for i := range common {
		common[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				common[i][j] = common[i+1][j+1] + 1
			} else {
				common[i][j] = max(common[i+1][j], common[i][j+1])
			}
		}
	}
	type op struct {
		mark byte // ' ', '-' or '+'
		line string
	}
	var ops []op
	for i, j := 0, 0; i < n || j < m; {
		switch {
		case i < n && j < m && a[i] == b[j]:
			ops = append(ops, op{' ', a[i]})
			i++
			j++
		case j < m && (i == n || common[i][j+1] >= common[i+1][j]):
			ops = append(ops, op{'+', b[j]})
			j++
		default:
			ops = append(ops, op{'-', a[i]})
			i++
		}
	}
	show := make([]bool, len(ops))
	for k, o := range ops {
		if o.mark != ' ' {
			for c := max(0, k-diffContext); c <= min(len(ops)-1, k+diffContext); c++ {
				show[c] = true
			}
		}
	}
	var out strings.Builder
	for k, o := range ops {
		switch {
		case show[k]:
			out.WriteByte(o.mark)
			out.WriteByte(' ')
			out.WriteString(o.line)
			out.WriteByte('\n')
		case k == 0 || show[k-1]:
			out.WriteString("  ...\n")
		}
	}
	return out.String()
}

func TestCompare(t *testing.T) {
	exact := script{}
	live := script{live: true, masks: []*regexp.Regexp{
		regexp.MustCompile(`\d\d:\d\d:\d\d`),
		regexp.MustCompile(`(?m)^(\w{4})\s`),
		regexp.MustCompile(`"seq": (\d+), "n": (\d+)`),
	}}
	for _, tt := range []struct {
		name        string
		s           script
		readme, run string
		differs     bool
		wantInDiff  []string
	}{
		{name: "identical", s: exact, readme: "$ x\na  b\n", run: "$ x\na  b\n"},
		{name: "trailing blanks and lines", s: exact, readme: "$ x\na\n", run: "$ x  \na\t\n\n\n"},
		{name: "a changed figure", s: exact, readme: "$ x\nstale 7\nend\n", run: "$ x\nstale 8\nend\n",
			differs: true, wantInDiff: []string{"- stale 7", "+ stale 8", "  $ x", "  end"}},
		{name: "a missing line", s: exact, readme: "$ x\na\n", run: "$ x\na\nb\n",
			differs: true, wantInDiff: []string{"+ b"}},
		{name: "exact examples keep their spacing", s: exact, readme: "a b\n", run: "a  b\n", differs: true},
		{name: "exact examples are not masked", s: exact, readme: "at 10:00:00\n", run: "at 11:00:00\n", differs: true},
		{name: "live: masked parts may differ", s: live,
			readme: "10:00:00 warn {\"seq\": 3, \"n\": 1, \"token\": 2}\n",
			run:    "11:59:07 warn {\"seq\": 17, \"n\": 40, \"token\": 2}\n"},
		{name: "live: the rest may not", s: live,
			readme:  "10:00:00 warn {\"seq\": 3, \"n\": 1, \"token\": 2}\n",
			run:     "11:59:07 warn {\"seq\": 17, \"n\": 40, \"token\": 3}\n",
			differs: true, wantInDiff: []string{`- * warn {"seq": *, "n": *, "token": 2}`, `+ * warn {"seq": *, "n": *, "token": 3}`}},
		{name: "live: blank runs are one space", s: live, readme: "EPOCH   4\n", run: "EPOCH\t4  \n"},
		{name: "live: rows keyed by a mask compare as a set", s: live,
			readme: "MEMBER EPOCH\nAbCd 4 work:0-31\nWxYz 4 work:32-63\n$ next\n",
			run:    "MEMBER EPOCH\nQqQq 4 work:32-63\nRrRr 4 work:0-31\n$ next\n"},
		{name: "live: but not as any set", s: live,
			readme: "AbCd 4 work:0-31\nWxYz 4 work:32-63\n",
			run:    "QqQq 4 work:0-31\nRrRr 4 work:0-31\n", differs: true},
		{name: "live: lines keep their order", s: live, readme: "a\nb\n", run: "b\na\n", differs: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := compare(tt.s, tt.readme, tt.run)
			if (d != "") != tt.differs {
				t.Fatalf("compare says %q; want a difference: %v", d, tt.differs)
			}
			for _, w := range tt.wantInDiff {
				if !strings.Contains(d, w+"\n") {
					t.Errorf("diff lacks %q:\n%s", w, d)
				}
			}
		})
	}
}

func TestMask(t *testing.T) {
	for _, tt := range []struct {
		name, re, text, want string
	}{
		{"whole match", `\d+`, "a 12 b 3", "a * b *"},
		{"groups only", `"(\w+)": (\d+)`, `{"seq": 12, "n": 3}`, `{"*": *, "*": *}`},
		{"a group that took no part", `x(\d)?y`, "xy x1y", "xy x*y"},
		{"a group in a group", `((\d)\d)`, "a 12", "a *"},
		{"line anchors", `(?m)^(\w+) `, "ab cd\nef gh", "* cd\n* gh"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := mask(tt.text, script{masks: []*regexp.Regexp{regexp.MustCompile(tt.re)}})
			if got != tt.want {
				t.Fatalf("mask(%q, %s) = %q, want %q", tt.text, tt.re, got, tt.want)
			}
		})
	}
}

func TestDiffElidesUnchangedLines(t *testing.T) {
	var a []string
	for _, l := range strings.Split("0 1 2 3 4 5 6 7 8 9 10 11 12", " ") {
		a = append(a, "line "+l)
	}
	b := append([]string(nil), a...)
	b[6] = "changed"
	want := "  ...\n  line 3\n  line 4\n  line 5\n+ changed\n- line 6\n  line 7\n  line 8\n  line 9\n  ...\n"
	if got := diff(a, b); got != want {
		t.Fatalf("diff:\n%s\nwant:\n%s", got, want)
	}
}
