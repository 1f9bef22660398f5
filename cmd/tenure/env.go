package main

import (
	"flag"
	"fmt"
	"strings"
)

// envName is the environment variable that sets the flag name:
// "session-timeout" is TENURE_SESSION_TIMEOUT.
func envName(flagName string) string {
	return "TENURE_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(flagName))
}

// envRenames gives a variable of its own to each flag whose name another
// command uses for something else, so that one variable has one meaning
// whatever command reads it: serve's --topic declares topics
// (name:partitions) and keeps TENURE_TOPIC, while the worker's --topic, a
// topic to claim, is TENURE_WORKER_TOPIC. Keyed by command, then flag.
// TestEnvOneMeaning keeps the table complete.
var envRenames = map[string]map[string]string{
	"worker": {
		"topic":          "TENURE_WORKER_TOPIC",
		"etcd-endpoints": "TENURE_WORKER_ETCD_ENDPOINTS",
		"etcd-prefix":    "TENURE_WORKER_ETCD_PREFIX",
		"write-timeout":  "TENURE_WORKER_WRITE_TIMEOUT",
		// The client's certificate, not serve's.
		"tls-cert": "TENURE_CLIENT_TLS_CERT",
		"tls-key":  "TENURE_CLIENT_TLS_KEY",
	},
	"groups": {
		"tls-cert": "TENURE_CLIENT_TLS_CERT",
		"tls-key":  "TENURE_CLIENT_TLS_KEY",
		"seed":     "TENURE_WHAT_IF_SEED",
		"seeds":    "TENURE_WHAT_IF_SEEDS",
	},
	"topics": {"tls-cert": "TENURE_CLIENT_TLS_CERT", "tls-key": "TENURE_CLIENT_TLS_KEY"},
	"users":  {"tls-cert": "TENURE_CLIENT_TLS_CERT", "tls-key": "TENURE_CLIENT_TLS_KEY"},
	// What an ACL command selects is never picked up from a variable
	// another command set (TENURE_GROUP, the worker's group).
	"acls": {
		"tls-cert": "TENURE_CLIENT_TLS_CERT", "tls-key": "TENURE_CLIENT_TLS_KEY",
		"principal": "TENURE_ACL_PRINCIPAL", "topic": "TENURE_ACL_TOPIC", "group": "TENURE_ACL_GROUP",
		"cluster": "TENURE_ACL_CLUSTER", "operation": "TENURE_ACL_OPERATION", "permission": "TENURE_ACL_PERMISSION",
		"host": "TENURE_ACL_HOST", "resource-pattern-type": "TENURE_ACL_RESOURCE_PATTERN_TYPE",
	},
	"tune": {"out": "TENURE_TUNE_OUT"},
	"chaos": {
		"duration":          "TENURE_CHAOS_DURATION",
		"election-ttl":      "TENURE_CHAOS_ELECTION_TTL",
		"postgres-dsn":      "TENURE_CHAOS_POSTGRES_DSN",
		"rebalance-timeout": "TENURE_CHAOS_REBALANCE_TIMEOUT",
		"seed":              "TENURE_CHAOS_SEED",
		"session-timeout":   "TENURE_CHAOS_SESSION_TIMEOUT",
		"shards":            "TENURE_CHAOS_SHARDS",
		"work-interval":     "TENURE_CHAOS_WORK_INTERVAL",
	},
	"chaos-committer": {
		"topic":      "TENURE_CHAOS_COMMITTER_TOPIC",
		"partitions": "TENURE_CHAOS_COMMITTER_PARTITIONS",
	},
}

// flagEnv is the environment variable of the flag name of the command
// whose flag set is fs (named "tenure <command>").
func flagEnv(fs *flag.FlagSet, flagName string) string {
	if v, ok := envRenames[commandOf(fs)][flagName]; ok {
		return v
	}
	return envName(flagName)
}

// commandOf is the command of a flag set named "tenure <command>" (or
// "<command>", as tests name them).
func commandOf(fs *flag.FlagSet) string {
	name := strings.TrimPrefix(fs.Name(), "tenure ")
	name, _, _ = strings.Cut(name, " ")
	return name
}

// applyEnv sets every flag that was not given on the command line from its
// environment variable, if that is set. The command line wins over the
// environment, and the environment over the default. A flag that is
// another name of a flag (-o of --output) has no variable of its own, and
// giving it counts as giving the flag it names. Another subcommand's flag
// (foreignFlag) is not set: its variable may be exported for that one.
func applyEnv(fs *flag.FlagSet, lookup func(string) (string, bool)) error {
	given := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) {
		given[f.Name] = true
		if a, ok := f.Value.(interface{ aliasOf() string }); ok {
			given[a.aliasOf()] = true
		}
	})
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if _, alias := f.Value.(interface{ aliasOf() string }); err != nil || given[f.Name] || alias || isForeign(f) {
			return
		}
		v, ok := lookup(flagEnv(fs, f.Name))
		if !ok {
			return
		}
		if serr := fs.Set(f.Name, v); serr != nil {
			err = fmt.Errorf("invalid value %q for %s: %v", v, flagEnv(fs, f.Name), serr)
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				err = fmt.Errorf("invalid value %q for %s: a boolean is true or false", v, flagEnv(fs, f.Name))
			}
		}
	})
	return err
}
