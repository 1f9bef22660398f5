package main

import (
	"flag"
	"slices"
	"strings"
	"testing"
)

// sameMeaning lists the variables that several commands read, each for a
// flag that means the same to all of them though its help says it in
// other words.
var sameMeaning = map[string]string{
	"TENURE_BROKERS":    "the coordinator's addresses",
	"TENURE_ADMIN":      "a node's admin API",
	"TENURE_TIMEOUT":    "how long a client command waits for the cluster",
	"TENURE_LOG_LEVEL":  "the log level",
	"TENURE_GROUP":      "the group to join",
	"TENURE_ROUTE":      "the proxies to dial the nodes through",
	"TENURE_DURATION":   "simulated time of a run (sim, tune)",
	"TENURE_SET":        "a scenario argument (sim, tune)",
	"TENURE_CPUPROFILE": "the file a CPU profile of the command's work goes to (serve, sim)",
}

// TestEnvOneMeaning: every environment variable has one meaning, whatever
// command reads it. Two commands whose flags share a variable must give
// them the same help, or the variable must be in sameMeaning; otherwise
// one of them needs a variable of its own (envRenames). TENURE_TOPIC
// meant name:partitions to serve and a topic to claim to worker, so
// TENURE_TOPIC=work:64 made a worker join the topic "work:64".
func TestEnvOneMeaning(t *testing.T) {
	type use struct{ cmd, flag, usage string }
	uses := map[string][]use{}
	for _, c := range commands() {
		fs := flag.NewFlagSet("tenure "+c.name, flag.ContinueOnError)
		c.setup(fs)
		fs.VisitAll(func(f *flag.Flag) {
			if _, alias := f.Value.(interface{ aliasOf() string }); alias {
				return
			}
			v := flagEnv(fs, f.Name)
			uses[v] = append(uses[v], use{c.name, f.Name, f.Usage})
		})
	}
	for v, us := range uses {
		if _, ok := sameMeaning[v]; ok || len(us) < 2 {
			continue
		}
		for _, u := range us[1:] {
			if u.usage != us[0].usage {
				t.Errorf("%s is --%s of tenure %s (%q) and --%s of tenure %s (%q): give one a variable of its own in envRenames, or list it in sameMeaning",
					v, us[0].flag, us[0].cmd, us[0].usage, u.flag, u.cmd, u.usage)
			}
		}
	}
	// Every rename names a flag that exists.
	for cmd, flags := range envRenames {
		for name := range flags {
			found := false
			for v, us := range uses {
				if v == flags[name] && slices.ContainsFunc(us, func(u use) bool { return u.cmd == cmd && u.flag == name }) {
					found = true
				}
			}
			if !found && cmd != "acls" {
				t.Errorf("envRenames: tenure %s has no flag --%s", cmd, name)
			}
		}
	}
}

// TestWorkerTopicVariable: serve's TENURE_TOPIC does not reach a worker,
// whose topic is TENURE_WORKER_TOPIC; and a worker given serve's form of a
// topic says what is wrong.
func TestWorkerTopicVariable(t *testing.T) {
	env := func(vars map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	}
	for _, tt := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"TENURE_TOPIC": "work:64"}, "work"},
		{map[string]string{"TENURE_TOPIC": "work:64", "TENURE_WORKER_TOPIC": "jobs"}, "jobs"},
	} {
		fs := flag.NewFlagSet("tenure worker", flag.ContinueOnError)
		o := addWorkerFlags(fs)
		if err := fs.Parse(nil); err != nil {
			t.Fatal(err)
		}
		if err := applyEnv(fs, env(tt.vars)); err != nil {
			t.Fatal(err)
		}
		if o.topic != tt.want {
			t.Errorf("with %v the worker's topic is %q, want %q", tt.vars, o.topic, tt.want)
		}
	}
	fs := flag.NewFlagSet("tenure worker", flag.ContinueOnError)
	o := addWorkerFlags(fs)
	if err := fs.Parse([]string{"--topic", "work:64"}); err != nil {
		t.Fatal(err)
	}
	err := o.validate()
	if err == nil || !strings.Contains(err.Error(), `--topic "work:64" is not a topic name`) {
		t.Fatalf("validate: %v", err)
	}
}
