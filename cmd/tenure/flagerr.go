package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// flagError turns an error of fs.Parse into one line a user can act on:
// an unknown flag names the closest known one, and a duration without a
// unit says that it needs one. The usage is not dumped with it: a long
// usage pushes the one line that matters off the screen.
func flagError(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		name = strings.TrimLeft(name, "-")
		msg = "unknown flag --" + name
		if ours := fs.Lookup(kafkaFlagNames[name]); ours != nil && !isForeign(ours) {
			msg += "; tenure's name for it is --" + ours.Name
		} else if near := closestFlag(fs, name); near != "" {
			msg += "; did you mean --" + near + "?"
		}
	} else if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		name = strings.TrimLeft(name, "-")
		if f := fs.Lookup(name); f != nil && isForeign(f) {
			return f.Value.(*foreignFlag).refusal() // its value is beside the point
		}
		msg = "flag --" + name + " needs a value"
	} else if _, rest, ok := strings.Cut(msg, " for flag -"); ok && strings.HasPrefix(msg, "invalid value ") {
		name, _, _ := strings.Cut(rest, ":")
		msg = strings.Replace(msg, " for flag -"+name, " for --"+name, 1)
		if isDuration(fs.Lookup(name)) {
			q, _ := strconv.QuotedPrefix(strings.TrimPrefix(msg, "invalid value "))
			v, _ := strconv.Unquote(q)
			if _, perr := time.ParseDuration(v); perr != nil {
				msg = fmt.Sprintf("invalid value %s for --%s: %v; a duration has a unit: 300ms, 5s, 1m", q, name, perr)
			}
		}
	} else if q, rest, ok := strings.Cut(strings.TrimPrefix(msg, "invalid boolean value "), " for -"); ok && strings.HasPrefix(msg, "invalid boolean value ") {
		name, _, _ := strings.Cut(rest, ":")
		msg = fmt.Sprintf("invalid value %s for --%s: a boolean flag is --%s (true) or --%s=false", q, name, name, name)
	}
	return usagef("%s (see --help)", msg)
}

// kafkaFlagNames are flags of Kafka's own tools (kafka-topics,
// kafka-consumer-groups, kafka-acls, kafka-console-producer) that
// tenure's commands name otherwise: an operator's fingers type them, and no edit distance
// leads from --bootstrap-server to --brokers.
var kafkaFlagNames = map[string]string{
	"bootstrap-server":  "brokers",
	"bootstrap-servers": "brokers",
	"bootstrap":         "brokers",
	"broker-list":       "brokers",
}

func isDuration(f *flag.Flag) bool {
	if f == nil {
		return false
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return false
	}
	_, ok = g.Get().(time.Duration)
	return ok
}

// closestFlag returns the flag of fs nearest to name, or "" if none is
// near enough to be a typo of it.
func closestFlag(fs *flag.FlagSet, name string) string {
	best, bestD := "", 0
	fs.VisitAll(func(f *flag.Flag) {
		if _, alias := f.Value.(interface{ aliasOf() string }); alias || isForeign(f) {
			return // -o is in every name (the flag it stands for is offered); another subcommand's is no typo
		}
		d := editDistance(name, f.Name)
		if strings.Contains(f.Name, name) || strings.Contains(name, f.Name) {
			d = min(d, 1)
		}
		if best == "" || d < bestD || d == bestD && f.Name < best {
			best, bestD = f.Name, d
		}
	})
	if bestD > max(2, len(name)/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
