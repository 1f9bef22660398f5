package main

import (
	"context"
	"flag"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// adminFlags are the flags of the commands that administer a cluster over
// the Kafka protocol (tenure groups, topics, users, acls).
type adminFlags struct {
	brokers  *string
	timeout  *time.Duration
	security *clientSecurity
}

// adminFlagNames are the names of the flags addAdminFlags registers.
func adminFlagNames() []string {
	return flagNames(func(fs *flag.FlagSet) { addAdminFlags(fs) })
}

func addAdminFlags(fs *flag.FlagSet) adminFlags {
	return adminFlags{
		brokers:  fs.String("brokers", "127.0.0.1:9092", "comma-separated `host:port` list of the coordinator (or Kafka brokers)"),
		timeout:  fs.Duration("timeout", 10*time.Second, "give up on the cluster after this long"),
		security: addClientSecurityFlags(fs),
	}
}

// connect checks the flags and returns an admin client and a context
// bounded by --timeout; done releases both.
func (a adminFlags) connect(ctx context.Context) (adm *kadm.Client, actx context.Context, done func(), err error) {
	adm, closeClient, err := a.client()
	if err != nil {
		return nil, nil, nil, err
	}
	actx, cancel := context.WithTimeout(ctx, *a.timeout)
	return adm, actx, func() { cancel(); closeClient() }, nil
}

// kgoClient is connect for a command that sends raw requests.
func (a adminFlags) kgoClient(ctx context.Context) (cl *kgo.Client, actx context.Context, done func(), err error) {
	seeds := splitList(*a.brokers)
	if len(seeds) == 0 {
		return nil, nil, nil, usagef("--brokers is empty")
	}
	if *a.timeout <= 0 {
		return nil, nil, nil, usagef("--timeout must be positive")
	}
	opts, err := a.kgoOpts()
	if err != nil {
		return nil, nil, nil, err
	}
	if cl, err = kgo.NewClient(opts...); err != nil {
		return nil, nil, nil, err
	}
	actx, cancel := context.WithTimeout(ctx, *a.timeout)
	return cl, actx, func() { cancel(); cl.Close() }, nil
}

// client checks the flags and returns an admin client, for a command that
// bounds each exchange with the cluster by --timeout itself; done closes
// it. The client dials nothing until its first request.
func (a adminFlags) client() (adm *kadm.Client, done func(), err error) {
	seeds := splitList(*a.brokers)
	if len(seeds) == 0 {
		return nil, nil, usagef("--brokers is empty")
	}
	if *a.timeout <= 0 {
		return nil, nil, usagef("--timeout must be positive")
	}
	opts, err := a.kgoOpts()
	if err != nil {
		return nil, nil, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

// kgoOpts are the options of a client of --brokers with the TLS and SASL
// flags.
func (a adminFlags) kgoOpts() ([]kgo.Opt, error) {
	sec, err := a.security.kgoOpts()
	if err != nil {
		return nil, err
	}
	return append([]kgo.Opt{kgo.SeedBrokers(splitList(*a.brokers)...)}, sec...), nil
}
