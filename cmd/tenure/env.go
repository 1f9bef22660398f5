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

// applyEnv sets every flag that was not given on the command line from its
// environment variable, if that is set. The command line wins over the
// environment, and the environment over the default. A flag that is
// another name of a flag (-o of --output) has no variable of its own, and
// giving it counts as giving the flag it names.
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
		if _, alias := f.Value.(interface{ aliasOf() string }); err != nil || given[f.Name] || alias {
			return
		}
		v, ok := lookup(envName(f.Name))
		if !ok {
			return
		}
		if serr := fs.Set(f.Name, v); serr != nil {
			err = fmt.Errorf("invalid value %q for %s: %v", v, envName(f.Name), serr)
		}
	})
	return err
}
