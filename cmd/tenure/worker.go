package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/twmb/franz-go/pkg/kgo"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/adminapi"
	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/internal/workload"
	"github.com/tenure-dev/tenure/member"
)

// workerCommand is `tenure worker`: the demo worker and smoke test.
func workerCommand() *command {
	return &command{
		name:    "worker",
		summary: "run a demo worker: claim partitions and append fenced records to etcd and/or PostgreSQL",
		help:    workerHelp,
		setup:   setupWorker,
	}
}

const workerHelp = `The worker joins --group on a tenure coordinator (or Kafka 4) with the KIP-848
protocol and, for every partition of --topic it claims, appends a numbered
record every --work-interval to a fenced resource, under the claim's fencing
token, committing the offset (records written) every --commit-every records:

  etcd      one transaction per record: check the partition's token and put
            <prefix>/records/<partition>/<seq>/<token>
  postgres  one transaction per record: check the partition's token in
            <table>_tokens and INSERT the record into <table>

--resource postgres,etcd writes every record to both, in that order; the
record counts as written once both accepted it, and a stale rejection by
either ends the claim. Each record names the worker (--instance-id, or its
first member ID) and the member ID of the claim it was written under.

A new owner first records its token at the resource, so every former owner
is fenced from then on. Start two or more workers on the same group and watch
the partitions spread ("claim started" / "claim stopped", with tokens), or
stop one (Ctrl-C: its claims are committed and handed over; with
--instance-id only after the session timeout, in case it comes back).

The pause: with --pause-after D --pause-for L, the worker freezes for L at
its first write after running for D: its connections to the coordinator
carry nothing (no heartbeats, no commits) and each work goroutine stops
between the check of its claim and its next write. Make L longer than the session timeout: the
coordinator expires the session and moves the partitions, with higher
tokens; when the worker wakes, the writes it had decided on go out with the
old tokens and the resource rejects them ("write rejected: stale token").

The pause is simulated from inside the process, so it differs from a real
stop-the-world pause in one way: the member library's clock keeps running,
so the worker notices the missing heartbeats and stops its claims during the
pause ("claim stopped", Suspect then Lost) rather than right after it. The
writes already decided go out after the pause either way. For a real freeze,
send the process SIGSTOP and later SIGCONT.

--attempt-log FILE appends one JSON line per operation the worker attempts
(admit and append at each resource, commit and fetch at the coordinator) and
per start and stop of a claim's work, with its start and end times and
outcome (ok, stale or error): what an independent checker compares with what
the resources hold. The format is documented in package internal/workload.

--verify-keys URL,... makes the resources refuse every token the coordinator
did not sign for their partition (tenure serve --sign-grants): the signing
keys come from the admin API of the first node named that answers (tenure
keys --help), fetched again every --verify-keys-refresh and at once when a
claim's own token is refused as unverified after a rotation. Unsigned tokens
are refused too. The check runs in the worker, against its own bugs: a
resource protects itself from hostile writers only where it runs the check.

--forge-every D makes the worker, beside its honest work, append every D a
record under a token it forged from its own claims' (another partition's, a
raised one, another member's, a tampered signature, one of a key of its
own, an invented unsigned one), through the same resources: the hostile
client of a chaos run's forging variant. Forged records have negative
sequence numbers; with --verify-keys every one is refused.

--records reads back what the workers of --group wrote to --topic's records
at the resources, joining nothing: for each token, the records held, how many
of them repeat a record already held (work redone from the last committed
offset: delivery is at least once), and how many were accepted after a record
with a newer token in their partition (stale writes that got through: 0
behind a fence).

--unfenced is a test and demo switch, never for real work: the resources
write without checking or recording tokens, so a zombie's late writes land.
It is the control run of a chaos test, proving that its checker catches
what the fence otherwise rejects.

Every write, commit and offset read gives up after --write-timeout and is
retried, so a black-holed resource or coordinator does not hang the worker.

The topic: tenure creates --topic when the worker first asks for it (unless
tenure serve runs with --auto-create-topics=false). A topic that does not
exist is waited for, with a line in the worker's log every 10 s naming it,
until --join-timeout (then the worker exits with status 1). Its variable is
TENURE_WORKER_TOPIC: TENURE_TOPIC is tenure serve's, which declares topics
as name:partitions, and so are TENURE_ETCD_ENDPOINTS and TENURE_ETCD_PREFIX
(the worker's are TENURE_WORKER_ETCD_ENDPOINTS and _PREFIX).

When every address of --brokers refuses connections for 5 s while the
worker joins (nothing listens there), it exits with status 1 at once,
saying so, instead of waiting out --join-timeout.

--session-timeout must be the coordinator's --consumer-session-timeout (or
lower): the protocol does not tell members. Ctrl-C (SIGINT) or SIGTERM drains:
every claim commits and returns, then the member leaves and the worker exits
with status 0.`

// workerOptions are the parsed flags of `tenure worker`.
type workerOptions struct {
	brokers          string
	group            string
	topic            string
	instanceID       string
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	suspectMargin    time.Duration
	logLevel         string

	resource      string
	admin         string
	etcdEndpoints string
	etcdPrefix    string
	postgresDSN   string
	postgresTable string

	workInterval time.Duration
	commitEvery  int
	writeTimeout time.Duration
	pauseAfter   time.Duration
	pauseFor     time.Duration

	attemptLog    string
	records       bool
	unfenced      bool
	verifyKeys    string
	verifyRefresh time.Duration
	forgeEvery    time.Duration
	route         string
	security      *clientSecurity
	// joinTimeout bounds the join; 0 waits until the context ends.
	joinTimeout time.Duration

	// observe, if set (by tests), sees every append's outcome.
	observe func(workload.Write)
	// joined, if set (by tests), is called with the session once joined.
	joined func(*member.Session)
	// dial, if set (by tests), makes the connections to the coordinator.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// addWorkerFlags registers the flags of `tenure worker` on fs.
func addWorkerFlags(fs *flag.FlagSet) *workerOptions {
	o := &workerOptions{}
	fs.StringVar(&o.brokers, "brokers", "127.0.0.1:9092", "comma-separated `host:port` list of the coordinator (or Kafka brokers)")
	fs.StringVar(&o.group, "group", "workers", "`group` to join")
	fs.StringVar(&o.topic, "topic", "work", "`topic` whose partitions to claim (created on first use by tenure)")
	fs.StringVar(&o.instanceID, "instance-id", "", "static member `id` (KIP-345): a restart within the session timeout keeps the partitions (default: dynamic)")
	fs.DurationVar(&o.sessionTimeout, "session-timeout", coordinator.DefaultConfig().ConsumerSessionTimeout, "the coordinator's session timeout (tenure serve --consumer-session-timeout)")
	fs.DurationVar(&o.rebalanceTimeout, "rebalance-timeout", 60*time.Second, "how long a revoked claim may take to commit and stop")
	fs.DurationVar(&o.suspectMargin, "suspect-margin", 0, "how much earlier than the session allows claims stop when heartbeats go unanswered; 0 means session timeout / 20")
	fs.StringVar(&o.logLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	fs.StringVar(&o.resource, "resource", "etcd", "`kinds` of resource the records go to, comma-separated, written in that order: etcd, postgres")
	fs.StringVar(&o.etcdEndpoints, "etcd-endpoints", "", "comma-separated etcd `endpoints`, for --resource etcd (default: the coordinator's own etcd, as its admin API at --admin names it)")
	fs.StringVar(&o.admin, "admin", "http://"+defaultHTTP, "`URL` of a node's --http listener (its admin API), asked for its etcd when --resource etcd has no --etcd-endpoints")
	fs.StringVar(&o.etcdPrefix, "etcd-prefix", "", "etcd key `prefix` of the records and tokens (default: tenure-demo/<group>/<topic>)")
	fs.StringVar(&o.postgresDSN, "postgres-dsn", "", "PostgreSQL `dsn` (postgres://user@host:port/db?sslmode=disable), for --resource postgres")
	fs.StringVar(&o.postgresTable, "postgres-table", "tenure_records", "`table` of the records; the tokens are kept in <table>_tokens. Both are created if missing")
	fs.DurationVar(&o.workInterval, "work-interval", 200*time.Millisecond, "time one record takes, per partition")
	fs.IntVar(&o.commitEvery, "commit-every", 10, "commit the offset every `n` records (0: only when a claim is handed over)")
	fs.DurationVar(&o.joinTimeout, "join-timeout", 30*time.Second, "give up when the group is not joined within this long (no broker answers, no coordinator, no topic); 0 waits forever")
	fs.DurationVar(&o.writeTimeout, "write-timeout", 5*time.Second, "how long one write, commit or offset read may take before it is retried")
	fs.BoolVar(&o.records, "records", false, "join nothing: print, by token, the records the resources hold of --group and --topic, how many were written again and how many were accepted after a newer token, and exit")
	fs.StringVar(&o.attemptLog, "attempt-log", "", "append one JSON line per attempted operation and claim start or stop to `file` (for a checker)")
	fs.StringVar(&o.verifyKeys, "verify-keys", "", "comma-separated `URLs` of coordinator nodes' --http listeners: the resources verify every token with the signing keys they publish, and refuse unsigned ones (tenure serve --sign-grants)")
	fs.DurationVar(&o.verifyRefresh, "verify-keys-refresh", 30*time.Second, "how often the signing keys of --verify-keys are fetched again")
	fs.DurationVar(&o.forgeEvery, "forge-every", 0, "TEST ONLY: also append a record under a forged token every `interval` (a chaos run's hostile client; 0: never)")
	fs.BoolVar(&o.unfenced, "unfenced", false, "TEST/DEMO ONLY: write without checking tokens, so stale writes land (a chaos test's control run)")
	fs.DurationVar(&o.pauseAfter, "pause-after", 0, "freeze the worker at its first write after running this long (with --pause-for)")
	fs.DurationVar(&o.pauseFor, "pause-for", 0, "length of the freeze; longer than the session timeout to see the worker fenced")
	o.security = addClientSecurityFlags(fs)
	fs.StringVar(&o.route, "route", "", "dial the coordinator's nodes through proxies: comma-separated `host:port=host:port` pairs, each node's address as it advertises it = the proxy's (a fault-injection test's)")
	return o
}

func setupWorker(fs *flag.FlagSet) func(ctx context.Context, args []string) error {
	o := addWorkerFlags(fs)
	return func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return usagef("unexpected arguments %q", args)
		}
		if err := o.validate(); err != nil {
			return err
		}
		log, err := newLogger(fs.Output(), o.logLevel)
		if err != nil {
			return err
		}
		defer log.Sync()
		if o.records {
			return printRecords(ctx, o, os.Stdout, log)
		}
		return runWorker(ctx, o, log)
	}
}

// validate checks the options that need no network.
func (o *workerOptions) validate() error {
	switch {
	case len(splitList(o.brokers)) == 0:
		return usagef("--brokers is empty")
	case o.group == "":
		return usagef("--group is empty")
	case !validTopicName(o.topic):
		return usagef("--topic %q is not a topic name (1 to 249 of a-z, A-Z, 0-9, '.', '_', '-'): the worker claims an existing topic's partitions; a topic is declared with its partition count by tenure serve --topic name:partitions or tenure topics create", o.topic)
	case o.sessionTimeout <= 0:
		return usagef("--session-timeout must be positive")
	case o.rebalanceTimeout <= 0:
		return usagef("--rebalance-timeout must be positive")
	case o.suspectMargin < 0:
		return usagef("--suspect-margin must not be negative")
	case o.workInterval <= 0:
		return usagef("--work-interval must be positive")
	case o.commitEvery < 0:
		return usagef("--commit-every must not be negative")
	case o.writeTimeout <= 0:
		return usagef("--write-timeout must be positive")
	case o.pauseAfter < 0 || o.pauseFor < 0:
		return usagef("--pause-after and --pause-for must not be negative")
	case (o.pauseAfter > 0) != (o.pauseFor > 0):
		return usagef("--pause-after and --pause-for go together")
	case o.verifyKeys != "" && o.unfenced:
		return usagef("--verify-keys and --unfenced do not go together: an unfenced resource checks no token")
	case o.verifyKeys != "" && o.verifyRefresh <= 0:
		return usagef("--verify-keys-refresh must be positive")
	case o.forgeEvery < 0:
		return usagef("--forge-every must not be negative")
	}
	kinds := splitList(o.resource)
	if len(kinds) == 0 {
		return usagef("--resource is empty")
	}
	for i, kind := range kinds {
		if slices.Contains(kinds[:i], kind) {
			return usagef("--resource names %s twice", kind)
		}
		switch kind {
		case "etcd":
			if len(splitList(o.etcdEndpoints)) == 0 && o.admin == "" {
				return usagef("--resource etcd needs --etcd-endpoints, or --admin to ask the coordinator for its etcd")
			}
		case "postgres":
			if o.postgresDSN == "" {
				return usagef("--resource postgres needs --postgres-dsn")
			}
			if err := workload.CheckTable(o.postgresTable); err != nil {
				return usagef("--postgres-table: %v", err)
			}
		default:
			return usagef("unknown resource %q (etcd or postgres)", kind)
		}
	}
	if _, err := parseRoutes(o.route); err != nil {
		return err
	}
	if _, _, err := o.security.config(); err != nil {
		return err
	}
	return nil
}

// validTopicName applies Kafka's rule for topic names.
func validTopicName(name string) bool {
	if name == "" || len(name) > 249 || name == "." || name == ".." {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// runWorker runs a worker until ctx ends (then drains) or the coordinator
// refuses the member.
func runWorker(ctx context.Context, o *workerOptions, log *zap.Logger) (err error) {
	var attempts *workload.AttemptLog
	if o.attemptLog != "" {
		f, err := os.OpenFile(o.attemptLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("attempt log: %w", err)
		}
		attempts = workload.NewAttemptLog(f)
		defer func() {
			// The log writes each line as it goes: closing flushes
			// nothing, but a failed write earlier means lines are missing,
			// which the checker must not take for attempts not made.
			err = errors.Join(err, attempts.Err(), f.Close())
		}()
	}
	// The member ID is chosen here, not by the library, so that records
	// can name their writer before the join completes.
	memberID := newMemberID()
	name := o.instanceID
	if name == "" {
		name = memberID
	}
	if o.route != "" && o.dial == nil {
		rs, err := parseRoutes(o.route)
		if err != nil {
			return err
		}
		o.dial = rs.dialer()
	}
	tlsCfg, mech, err := o.security.config()
	if err != nil {
		return err
	}
	var pause *workload.Pause
	var clientOpts []kgo.Opt
	dial := o.dial
	if o.pauseFor > 0 {
		pause = new(workload.Pause)
		dial = pause.Dialer(o.dial)
	}
	if dial != nil {
		// kgo takes a dialer or a TLS configuration, not both: the
		// dialer does the TLS.
		clientOpts = append(clientOpts, kgo.Dialer(tlsDialer(dial, tlsCfg)))
		tlsCfg = nil
	}
	var keys *keyFetcher
	var topic topicInfo
	if o.verifyKeys != "" || o.forgeEvery > 0 {
		kopts := append([]kgo.Opt{kgo.SeedBrokers(splitList(o.brokers)...)}, clientOpts...)
		if tlsCfg != nil {
			kopts = append(kopts, kgo.DialTLSConfig(tlsCfg))
		}
		if mech != nil {
			kopts = append(kopts, kgo.SASL(mech))
		}
		topic, err = retry(ctx, log, "looking up the topic", func(ctx context.Context) (topicInfo, error) {
			return lookupTopic(ctx, kopts, o.topic)
		})
		if err == nil && o.verifyKeys != "" {
			keys, err = startVerifier(ctx, o, topic.id, log)
		}
		if err != nil {
			if ctx.Err() != nil {
				log.Info("stopped before joining")
				return nil
			}
			return err
		}
	}
	res, closeRes, err := openResources(ctx, o, attempts, keys.verifier(), log)
	if err != nil {
		if ctx.Err() != nil {
			log.Info("stopped before joining")
			return nil
		}
		return err
	}
	defer closeRes()
	if o.unfenced {
		log.Warn("UNFENCED: the resources check no token; stale writes land (test/demo control only)")
	}
	w, err := workload.New(workload.Config{
		Resource:     res,
		Name:         name,
		Interval:     o.workInterval,
		CommitEvery:  o.commitEvery,
		WriteTimeout: o.writeTimeout,
		Pause:        pause,
		Logger:       log,
		Observe:      o.observe,
		Attempts:     attempts,
		Unverified:   keys.refusedHook(),
	})
	if err != nil {
		return err
	}
	log.Info("joining", zap.String("group", o.group), zap.String("topic", o.topic),
		zap.String("brokers", o.brokers), zap.String("resource", o.resource), zap.Bool("unfenced", o.unfenced),
		zap.String("member", memberID), zap.String("worker", name))
	jctx, cancelJoin := ctx, context.CancelFunc(func() {})
	if o.joinTimeout > 0 {
		jctx, cancelJoin = context.WithTimeoutCause(ctx, o.joinTimeout,
			fmt.Errorf("not joined within --join-timeout %v: is a tenure serve listening at --brokers %s?", o.joinTimeout, o.brokers))
	}
	if o.dial == nil {
		// Through routes (o.dial), the proxies answer whatever the nodes
		// do: only a direct dial tells a dead port.
		var refused context.CancelCauseFunc
		jctx, refused = context.WithCancelCause(jctx)
		stopJoin := cancelJoin
		cancelJoin = func() { refused(nil); stopJoin() }
		go watchSeeds(jctx, splitList(o.brokers), seedsRefusedFor, seedProbeEvery, refused)
	}
	s, err := member.Join(jctx, member.Config{
		Brokers:          splitList(o.brokers),
		TLS:              tlsCfg,
		SASL:             mech,
		ClientOpts:       clientOpts,
		Group:            o.group,
		Topics:           []string{o.topic},
		MemberID:         memberID,
		InstanceID:       o.instanceID,
		SessionTimeout:   o.sessionTimeout,
		RebalanceTimeout: o.rebalanceTimeout,
		SuspectMargin:    o.suspectMargin,
		Logger:           log.Named("member"),
	}, w.Handle)
	cancelJoin()
	if err != nil {
		if ctx.Err() != nil {
			log.Info("stopped before joining")
			return nil
		}
		return err
	}
	log.Info("joined", zap.String("member", s.MemberID()), zap.String("worker", name))
	if o.joined != nil {
		o.joined(s)
	}

	var bg sync.WaitGroup
	pauseCtx, stopPause := context.WithCancel(ctx)
	if pause != nil {
		bg.Go(func() { pause.Run(pauseCtx, o.pauseAfter, o.pauseFor, log) })
	}
	var forger *workload.Forger
	if o.forgeEvery > 0 {
		if forger, err = newForger(o, res, s, topic, name, attempts, log); err != nil {
			stopPause()
			return err
		}
		log.Warn("FORGING: a record under a forged token every --forge-every (a chaos test's hostile client)", zap.Duration("every", o.forgeEvery))
		bg.Go(func() { forger.Run(pauseCtx) })
	}
	select {
	case <-ctx.Done():
		log.Info("stopping: committing and handing over every claim")
	case <-s.Done():
	}
	stopPause()
	bg.Wait()

	// The handlers get the rebalance timeout to commit and return. A leave
	// that cannot reach the coordinator ends by itself once the session
	// has surely expired, within a session timeout: past both, something
	// is stuck.
	cctx, cancel := context.WithTimeout(context.Background(), o.rebalanceTimeout+o.sessionTimeout)
	defer cancel()
	err = s.Close(cctx)
	st := w.Stats()
	fields := []zap.Field{zap.Int64("written", st.Written), zap.Int64("rejected", st.Rejected),
		zap.Int64("unverified", st.Unverified), zap.Int64("held_by_pause", st.Held)}
	if forger != nil {
		tried, admitted := forger.Forged()
		fields = append(fields, zap.Int64("forged", tried), zap.Int64("forged_admitted", admitted))
	}
	log.Info("stopped", fields...)
	return err
}

// openResources connects to the resources o.resource names, checks that
// they answer, and returns them as one resource (a fan-out if there are
// several), each logged on attempts if it is not nil, and the function
// that closes them.
func openResources(ctx context.Context, o *workerOptions, attempts *workload.AttemptLog, verifier *epoch.Verifier, log *zap.Logger) (workload.Resource, func(), error) {
	var rs []workload.Resource
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	for _, kind := range splitList(o.resource) {
		r, closeRes, err := openResource(ctx, o, kind, verifier, log)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		if attempts != nil {
			r = workload.LogAttempts(kind, r, attempts)
		}
		rs, closers = append(rs, r), append(closers, closeRes)
	}
	if len(rs) == 1 {
		return rs[0], closeAll, nil
	}
	fan, err := workload.NewFanout(rs...)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return fan, closeAll, nil
}

// openResource connects to the resource of the given kind and checks that
// it answers.
func openResource(ctx context.Context, o *workerOptions, kind string, verifier *epoch.Verifier, log *zap.Logger) (workload.Resource, func(), error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	switch kind {
	case "etcd":
		endpoints := splitList(o.etcdEndpoints)
		if len(endpoints) == 0 {
			info, err := (&adminapi.Client{Base: o.admin}).Etcd(cctx)
			if err != nil {
				return nil, nil, fmt.Errorf("etcd: no --etcd-endpoints, and the coordinator's admin API does not name its etcd: %w", err)
			}
			endpoints = info.Endpoints
			log.Info("no --etcd-endpoints: the records go to the coordinator's etcd, which its admin API names",
				zap.String("admin", o.admin), zap.Strings("endpoints", endpoints), zap.Bool("embedded", info.Embedded))
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return nil, nil, fmt.Errorf("etcd: %w", err)
		}
		if _, err := cli.Get(cctx, "tenure-worker-health"); err != nil {
			cli.Close()
			return nil, nil, fmt.Errorf("etcd at %s: %w", strings.Join(endpoints, ","), err)
		}
		prefix := o.etcdPrefix
		if prefix == "" {
			prefix = "tenure-demo/" + o.group + "/" + o.topic
		}
		if o.unfenced {
			return workload.NewUnfencedEtcdResource(cli, prefix), func() { cli.Close() }, nil
		}
		return workload.NewEtcdResource(cli, prefix, workload.Verify(verifier)), func() { cli.Close() }, nil
	case "postgres":
		db, err := sql.Open("pgx", o.postgresDSN)
		if err != nil {
			return nil, nil, fmt.Errorf("postgres: %w", err)
		}
		// Every claim writes every work interval: keep the connections
		// rather than opening one per write beyond database/sql's two idle
		// ones.
		db.SetMaxOpenConns(16)
		db.SetMaxIdleConns(16)
		var res *workload.SQLResource
		if o.unfenced {
			res, err = workload.NewUnfencedSQLResource(db, o.postgresTable)
		} else {
			res, err = workload.NewSQLResource(db, o.postgresTable, workload.Verify(verifier))
		}
		if err == nil {
			err = db.PingContext(cctx)
		}
		if err == nil {
			err = res.CreateTables(cctx)
		}
		if err != nil {
			db.Close()
			return nil, nil, fmt.Errorf("postgres: %w", err)
		}
		return res, func() { db.Close() }, nil
	}
	return nil, nil, errors.New("no resource") // validate rules this out
}

// newMemberID returns 16 random bytes in URL-safe base64, as Kafka's
// clients generate KIP-848 member IDs.
func newMemberID() string {
	var b [16]byte
	_, _ = io.ReadFull(rand.Reader, b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
