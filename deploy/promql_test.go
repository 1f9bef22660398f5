package deploy

import (
	"fmt"
	"slices"
	"strings"
)

// uses is what one PromQL expression refers to, as far as the checks
// here need: the series it selects, with the label names of their
// matchers, and the label names it groups or matches by.
type uses struct {
	selectors []selector
	// grouping holds the labels of by, without, on, ignoring, group_left
	// and group_right.
	grouping []string
}

type selector struct {
	name   string
	labels []string
}

// keywords are PromQL's words that are not metrics: operators, and the
// aggregations, which may take their by or without before their "(".
var keywords = []string{"and", "or", "unless", "bool", "offset", "inf", "nan", "atan2",
	"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
	"bottomk", "topk", "quantile", "limitk", "limit_ratio"}

// groupingWords take a parenthesised list of label names.
var groupingWords = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

// parseUses scans expr for metric names, matcher labels and grouping
// labels. It is a scanner, not a parser: promtool checks the syntax; this
// only has to tell a metric from a function, a keyword, a string, a
// duration or a number, which PromQL's lexical rules make simple: a name
// followed by "(" is a function or aggregation, strings are quoted, and
// durations sit in brackets.
func parseUses(expr string) (uses, error) {
	var u uses
	s := expr
	i := 0
	last := -1 // index in u.selectors of a name that may take a {...}
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(s, i)
			if err != nil {
				return u, err
			}
			i = end
			last = -1
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '[':
			end := strings.IndexByte(s[i:], ']')
			if end < 0 {
				return u, fmt.Errorf("unclosed [ at %d", i)
			}
			i += end + 1
			last = -1
		case c == '{':
			labels, end, err := matcherLabels(s, i)
			if err != nil {
				return u, err
			}
			if last >= 0 {
				u.selectors[last].labels = append(u.selectors[last].labels, labels...)
			} else {
				u.selectors = append(u.selectors, selector{labels: labels})
			}
			i = end
			last = -1
		case isNameStart(c):
			j := i
			for j < len(s) && isNameChar(s[j]) {
				j++
			}
			word := s[i:j]
			k := j
			for k < len(s) && (s[k] == ' ' || s[k] == '\t' || s[k] == '\n') {
				k++
			}
			next := byte(0)
			if k < len(s) {
				next = s[k]
			}
			switch {
			case slices.Contains(groupingWords, strings.ToLower(word)):
				if next != '(' {
					// group_left and group_right may stand alone.
					i, last = j, -1
					continue
				}
				end := strings.IndexByte(s[k:], ')')
				if end < 0 {
					return u, fmt.Errorf("unclosed %s( at %d", word, k)
				}
				for _, l := range strings.Split(s[k+1:k+end], ",") {
					if l = strings.TrimSpace(l); l != "" {
						u.grouping = append(u.grouping, l)
					}
				}
				i, last = k+end+1, -1
			case next == '(' || slices.Contains(keywords, strings.ToLower(word)):
				i, last = j, -1
			default:
				u.selectors = append(u.selectors, selector{name: word})
				i, last = j, len(u.selectors)-1
			}
		case c >= '0' && c <= '9' || c == '.':
			// A number (1e3, 0x1f, 0.25) or a duration after offset.
			for i < len(s) && (isNameChar(s[i]) || s[i] == '.') {
				i++
			}
			last = -1
		default:
			i++
			last = -1
		}
	}
	return u, nil
}

// matcherLabels returns the label names of the matchers in the braces
// that open at s[i], and the index after the closing brace.
func matcherLabels(s string, i int) ([]string, int, error) {
	var labels []string
	i++
	for i < len(s) {
		switch c := s[i]; {
		case c == '}':
			return labels, i + 1, nil
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(s, i)
			if err != nil {
				return nil, 0, err
			}
			i = end
		case isNameStart(c):
			j := i
			for j < len(s) && isNameChar(s[j]) {
				j++
			}
			labels = append(labels, s[i:j])
			i = j
		default:
			i++
		}
	}
	return nil, 0, fmt.Errorf("unclosed { in %q", s)
}

// skipString returns the index after the string literal that opens at
// s[i].
func skipString(s string, i int) (int, error) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`':
			j++
		case s[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unclosed string at %d in %q", i, s)
}

func isNameStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isNameChar(c byte) bool { return isNameStart(c) || c >= '0' && c <= '9' }
