//go:build unix

package chaos

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/internal/chaos/check"
	"github.com/tenure-dev/tenure/internal/workload"
)

// addProc registers a process of the run; its log goes to logs/<name>.log.
func (r *run) addProc(name, addr, bin string, args ...string) *proc {
	p := &proc{name: name, addr: addr, bin: bin, args: args, log: filepath.Join(r.cfg.Dir, "logs", name+".log")}
	r.mu.Lock()
	r.procs[name] = p
	r.mu.Unlock()
	return p
}

// startEtcd starts the three etcd members, each peer URL advertised through
// the fabric (peers>eI), and waits until the cluster serves.
func (r *run) startEtcd(ctx context.Context) error {
	var peers, clients, cluster []string
	for i := range 3 {
		name := fmt.Sprintf("e%d", i)
		peer, err := freeAddr()
		if err != nil {
			return err
		}
		client, err := freeAddr()
		if err != nil {
			return err
		}
		adv, err := r.fab.add("peers", name, peer)
		if err != nil {
			return err
		}
		peers, clients = append(peers, peer), append(clients, client)
		cluster = append(cluster, name+"=http://"+adv)
	}
	for i := range 3 {
		name := fmt.Sprintf("e%d", i)
		adv := strings.TrimPrefix(cluster[i], name+"=")
		r.etcd = append(r.etcd, r.addProc(name, clients[i], r.cfg.Etcd,
			"--name", name, "--data-dir", filepath.Join(r.cfg.Dir, "etcd", name),
			"--listen-client-urls", "http://"+clients[i], "--advertise-client-urls", "http://"+clients[i],
			"--listen-peer-urls", "http://"+peers[i], "--initial-advertise-peer-urls", adv,
			"--initial-cluster", strings.Join(cluster, ","), "--initial-cluster-state", "new",
			// Fast elections, as on a LAN; no fsync, as a process crash
			// (not a machine's) loses nothing the kernel was given.
			"--heartbeat-interval", "100", "--election-timeout", "1000", "--unsafe-no-fsync",
			"--log-level", "warn"))
	}
	if err := startAll(r.etcd); err != nil {
		return err
	}
	var urls []string
	for _, c := range clients {
		urls = append(urls, "http://"+c)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: urls, DialTimeout: 5 * time.Second, Logger: nopLogger})
	if err != nil {
		return err
	}
	r.direct = cli
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := cli.Put(cctx, "/chaos/ready", "1")
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("chaos: the etcd cluster does not serve: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startAll starts processes in parallel.
func startAll(ps []*proc) error {
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() { errs[i] = p.start(60 * time.Second) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startNodes starts the three tenure nodes, each reaching every etcd member
// through the fabric (nK>eI), and waits for a leader (with shards, for an
// owner of every shard).
func (r *run) startNodes(ctx context.Context) error {
	for k := range 3 {
		p, err := r.addNode(k)
		if err != nil {
			return err
		}
		r.nodes = append(r.nodes, p)
	}
	if err := startAll(r.nodes); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if r.placed(ctx) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return errors.New("chaos: the tenure nodes elect no leader (or place no shard)")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// addNode registers tenure node nK, not started, with its links to every
// etcd member.
func (r *run) addNode(k int) (*proc, error) {
	name := fmt.Sprintf("n%d", k)
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	var eps []string
	for i, e := range r.etcd {
		via, err := r.fab.add(name, fmt.Sprintf("e%d", i), e.addr)
		if err != nil {
			return nil, err
		}
		eps = append(eps, "http://"+via)
	}
	args := []string{"serve",
		"--listen", addr, "--etcd-endpoints", strings.Join(eps, ","), "--etcd-prefix", storePrefix,
		"--election-ttl", r.cfg.ElectionTTL.String(), "--partitions", strconv.Itoa(int(r.cfg.Partitions)),
		"--consumer-session-timeout", r.cfg.SessionTimeout.String(),
		"--consumer-heartbeat-interval", r.cfg.HeartbeatInterval.String(),
		"--shards", strconv.Itoa(r.cfg.Shards),
		"--log-level", "info"}
	if r.cfg.Forge {
		// The workers fetch the signing keys from the admin API,
		// directly: the keys are not what the faults test.
		http, err := freeAddr()
		if err != nil {
			return nil, err
		}
		r.httpAddrs = append(r.httpAddrs, "http://"+http)
		args = append(args, "--sign-grants", "--http", http)
	}
	return r.addProc(name, addr, r.cfg.Tenure, args...), nil
}

// placed reports whether the set serves: one-leader, whether it has a
// leader; sharded, whether every shard has an owner.
func (r *run) placed(ctx context.Context) bool {
	if r.cfg.Shards <= 1 {
		_, ok := r.findLeader(ctx)
		return ok
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := r.direct.Get(cctx, storePrefix+"meta/ha/shards/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	return err == nil && resp.Count >= int64(r.cfg.Shards)
}

// leader names the leading tenure node, as etcd's election keys say, or
// the last one known if etcd does not answer (a quorum loss).
func (r *run) leader(ctx context.Context) string {
	if name, ok := r.findLeader(ctx); ok {
		return name
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastLeader == "" {
		return "n0"
	}
	return r.lastLeader
}

// findLeader reads the HA set's election: the candidate key with the lowest
// create revision under <prefix>meta/ha/leader/ holds the leader's node ID,
// and <prefix>meta/ha/nodes/<id> its address.
func (r *run) findLeader(ctx context.Context) (string, bool) {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := r.direct.Get(cctx, storePrefix+"meta/ha/leader/", clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
	if err != nil || len(resp.Kvs) == 0 {
		return "", false
	}
	node, err := r.direct.Get(cctx, storePrefix+"meta/ha/nodes/"+string(resp.Kvs[0].Value))
	if err != nil || len(node.Kvs) == 0 {
		return "", false
	}
	var info struct {
		Addr string `json:"addr"`
	}
	if json.Unmarshal(node.Kvs[0].Value, &info) != nil {
		return "", false
	}
	for _, n := range r.nodes {
		if n.addr == info.Addr {
			r.mu.Lock()
			r.lastLeader = n.name
			r.mu.Unlock()
			return n.name, true
		}
	}
	return "", false
}

// createTables creates the workers' PostgreSQL tables, which the workers
// would otherwise race to create.
func (r *run) createTables(ctx context.Context) error {
	db, err := sql.Open("pgx", r.cfg.PostgresDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	res, err := workload.NewSQLResource(db, r.table)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := res.CreateTables(cctx); err != nil {
		return fmt.Errorf("chaos: PostgreSQL: %w", err)
	}
	return nil
}

// dropTables drops the run's tables: their rows are in rows.jsonl.
func (r *run) dropTables() {
	db, err := sql.Open("pgx", r.cfg.PostgresDSN)
	if err != nil {
		return
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db.ExecContext(ctx, "DROP TABLE IF EXISTS "+r.table+", "+r.table+"_tokens")
}

// startClients starts the workers and the committers, each with its own
// links to every tenure node (and, for a worker, to every etcd member and
// to PostgreSQL).
func (r *run) startClients(ctx context.Context) error {
	var brokers []string
	for _, n := range r.nodes {
		brokers = append(brokers, n.addr)
	}
	routes := func(name string) (string, error) {
		var rs []string
		for _, n := range r.nodes {
			via, err := r.fab.add(name, n.name, n.addr)
			if err != nil {
				return "", err
			}
			rs = append(rs, n.addr+"="+via)
		}
		return strings.Join(rs, ","), nil
	}
	pg, err := pgHost(r.cfg.PostgresDSN)
	if err != nil {
		return err
	}
	for j := range r.cfg.Workers {
		name := fmt.Sprintf("w%d", j)
		route, err := routes(name)
		if err != nil {
			return err
		}
		var eps []string
		for _, e := range r.etcd {
			via, err := r.fab.add(name, e.name, e.addr)
			if err != nil {
				return err
			}
			eps = append(eps, "http://"+via)
		}
		via, err := r.fab.add(name, "pg", pg)
		if err != nil {
			return err
		}
		dsn, err := proxiedDSN(r.cfg.PostgresDSN, via)
		if err != nil {
			return err
		}
		args := []string{"worker",
			"--brokers", strings.Join(brokers, ","), "--route", route,
			"--group", group, "--topic", topic,
			"--session-timeout", r.cfg.SessionTimeout.String(), "--rebalance-timeout", r.cfg.RebalanceTimeout.String(),
			"--resource", "postgres,etcd", "--etcd-endpoints", strings.Join(eps, ","), "--etcd-prefix", fencePrefix,
			"--postgres-dsn", dsn, "--postgres-table", r.table,
			"--work-interval", r.cfg.WorkInterval.String(), "--commit-every", "10", "--write-timeout", "2s",
			// A worker restarted while the faults cut it off keeps trying.
			"--join-timeout", "0",
			"--attempt-log", filepath.Join(r.cfg.Dir, check.AttemptsDir, name+".{life}.jsonl"),
			"--log-level", "info"}
		// Half the workers are static members (KIP-345), whose restarts
		// within the session keep their partitions.
		if j%2 == 0 {
			args = append(args, "--instance-id", name)
		}
		switch {
		case r.cfg.Unfenced:
			args = append(args, "--unfenced")
		case r.cfg.Forge && !r.cfg.Unverified:
			args = append(args, "--verify-keys", strings.Join(r.httpAddrs, ","))
		}
		if r.cfg.Forge && j == 1 {
			args = append(args, "--forge-every", r.cfg.WorkInterval.String())
		}
		r.workers = append(r.workers, r.addProc(name, "", r.cfg.Tenure, args...))
	}
	// The classic committers follow the KIP-848 ones: c0.. of the
	// schedule's committer faults are the KIP-848 ones.
	for j := range r.cfg.Committers + r.cfg.ClassicCommitters {
		name := fmt.Sprintf("c%d", j)
		route, err := routes(name)
		if err != nil {
			return err
		}
		g, extra := offsetGroup, []string(nil)
		if j >= r.cfg.Committers {
			g, extra = classicGroup, []string{"--classic"}
		}
		r.commits = append(r.commits, r.addProc(name, "", r.cfg.Tenure, append([]string{"chaos-committer",
			"--name", name, "--brokers", strings.Join(brokers, ","), "--route", route,
			"--group", g, "--topic", topic, "--partitions", strconv.Itoa(int(r.cfg.Partitions)),
			"--log", filepath.Join(r.cfg.Dir, "offsets", name+".{life}.jsonl"),
			// kgo warns at every commit that its consumer session has no
			// records to track: noise for a committer that fetches none.
			"--log-level", "error"}, extra...)...))
	}
	return startAll(append(slices.Clone(r.workers), r.commits...))
}

// stopClients stops the workers and committers with SIGTERM: they drain
// and leave.
func (r *run) stopClients() {
	var wg sync.WaitGroup
	for _, p := range append(slices.Clone(r.workers), r.commits...) {
		wg.Go(func() { p.stop(15 * time.Second) })
	}
	wg.Wait()
}

// stopAll stops every process left, clients first and etcd last.
func (r *run) stopAll() {
	r.stopClients()
	var wg sync.WaitGroup
	for _, p := range r.nodes {
		if r.frozen(p.name) {
			// Frozen for good: woken now, it would only find its
			// terms over.
			p.kill()
			continue
		}
		wg.Go(func() { p.stop(10 * time.Second) })
	}
	wg.Wait()
	// etcd's history is read by now; a member stopped gracefully would
	// try to hand its leadership to members stopping too, for seconds.
	for _, p := range r.etcd {
		p.kill()
	}
	if r.direct != nil {
		r.direct.Close()
	}
}

// sampleRevisions records etcd's revision about every 100 ms until ctx ends,
// so that the checker can place the history in time. A sample is taken
// from a linearizable read: its revision was reached by the time it
// returned.
func (r *run) sampleRevisions(ctx context.Context) []check.RevTime {
	var out []check.RevTime
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		resp, err := r.direct.Get(cctx, "/chaos/ready")
		cancel()
		if err == nil {
			out = append(out, check.RevTime{Rev: resp.Header.Revision, T: time.Now()})
		}
		select {
		case <-ctx.Done():
			return out
		case <-t.C:
		}
	}
}

// dumpHistory reads every revision of every key of the store's groups, under
// groups/ or, sharded, under shards/<s>/groups/, with a watch from revision
// 1 of the whole prefix: the runner's etcd never compacts.
func (r *run) dumpHistory(ctx context.Context) ([]check.KV, error) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	head, err := r.direct.Get(cctx, "/chaos/ready")
	if err != nil {
		return nil, fmt.Errorf("chaos: etcd after the run: %w", err)
	}
	last := head.Header.Revision
	var out []check.KV
	wch := r.direct.Watch(clientv3.WithRequireLeader(cctx), storePrefix, clientv3.WithPrefix(), clientv3.WithRev(1), clientv3.WithProgressNotify())
	go func() {
		// Ask for progress until the watch has caught up.
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-cctx.Done():
				return
			case <-t.C:
				r.direct.RequestProgress(cctx)
			}
		}
	}()
	for wr := range wch {
		if err := wr.Err(); err != nil {
			return nil, fmt.Errorf("chaos: watch the history: %w", err)
		}
		for _, ev := range wr.Events {
			if !groupKey(string(ev.Kv.Key)) {
				continue
			}
			kv := check.KV{Rev: ev.Kv.ModRevision, Key: ev.Kv.Key, Deleted: ev.Type == clientv3.EventTypeDelete}
			if !kv.Deleted {
				kv.Value = ev.Kv.Value
			}
			out = append(out, kv)
		}
		if wr.Header.Revision >= last && (wr.IsProgressNotify() || len(wr.Events) > 0 && wr.Events[len(wr.Events)-1].Kv.ModRevision >= last) {
			return out, nil
		}
	}
	return nil, fmt.Errorf("chaos: the history watch ended before revision %d: %w", last, cctx.Err())
}

// waitSettled waits until the committers' own callbacks say their groups
// have settled (every committer holds partitions, every partition is held
// by exactly one committer of each group, and no callback came for a
// second) and the coordinator's records say the workers' group has.
func (r *run) waitSettled(ctx context.Context, timeout time.Duration) error {
	began := time.Now()
	deadline := began.Add(timeout)
	var why string
	for {
		_, cbs, err := r.mergeOffsets()
		if err != nil {
			return err
		}
		why = settled(cbs, r.commits, r.cfg.Partitions, time.Now().Add(-time.Second))
		if why == "" {
			why = r.workersSettled(ctx)
		}
		if why == "" {
			r.logf("every group has settled, %v after the processes were up", time.Since(began).Round(time.Millisecond))
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("chaos: the stock consumers' groups did not settle in %v: %s", timeout, why)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// workersSettled says why the coordinator's records do not show the
// workers' group settled ("" if they do): every worker a member with
// partitions, every partition owned by one member, none pending or
// revoking.
func (r *run) workersSettled(ctx context.Context) string {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := r.direct.Get(cctx, storePrefix, clientv3.WithPrefix())
	if err != nil {
		return err.Error()
	}
	owners := map[int32]int{}
	members := 0
	for _, kv := range resp.Kvs {
		if !groupKey(string(kv.Key)) {
			continue
		}
		rec, ok, err := etcdstore.Decode(storePrefix, kv.Key, kv.Value)
		a, isAssignment := rec.(*coordinator.AssignmentRecord)
		if err != nil || !ok || !isAssignment || a.Group != group {
			continue
		}
		if len(a.Pending) > 0 || len(a.Revoking) > 0 {
			return "member " + a.MemberID + " of the workers' group has partitions pending or revoking"
		}
		if len(a.Owned) > 0 {
			members++
		}
		for _, o := range a.Owned {
			owners[o.Partition]++
		}
	}
	if members < r.cfg.Workers {
		return fmt.Sprintf("%d of %d workers own partitions", members, r.cfg.Workers)
	}
	for p := range r.cfg.Partitions {
		if owners[p] != 1 {
			return fmt.Sprintf("partition %d of the workers' group has %d owners", p, owners[p])
		}
	}
	return ""
}

// settled says why the callbacks do not show settled groups ("" if they
// do): see waitSettled. quietSince is the time after which no callback
// may have come.
func settled(cbs []check.Callback, commits []*proc, partitions int32, quietSince time.Time) string {
	slices.SortStableFunc(cbs, func(a, b check.Callback) int { return a.T.Compare(b.T) })
	held := map[string]map[int32]bool{}  // by client
	groups := map[string]map[int32]int{} // group -> partition -> holders
	for _, cb := range cbs {
		if cb.T.After(quietSince) {
			return fmt.Sprintf("%s's callbacks came within the last second", cb.Client)
		}
		if held[cb.Client] == nil {
			held[cb.Client] = map[int32]bool{}
		}
		if groups[cb.Group] == nil {
			groups[cb.Group] = map[int32]int{}
		}
		switch was := held[cb.Client][cb.Partition]; {
		case cb.Callback == check.CallbackAssigned && !was:
			held[cb.Client][cb.Partition] = true
			groups[cb.Group][cb.Partition]++
		case cb.Callback != check.CallbackAssigned && was:
			delete(held[cb.Client], cb.Partition)
			groups[cb.Group][cb.Partition]--
		}
	}
	for _, p := range commits {
		if len(held[p.name]) == 0 {
			return p.name + " holds no partition"
		}
	}
	for g, ps := range groups {
		for p := range partitions {
			if ps[p] != 1 {
				return fmt.Sprintf("partition %d of %s has %d holders", p, g, ps[p])
			}
		}
	}
	return ""
}

// groupKey reports whether key is one of a group's, in the unsharded layout
// or in a shard's (etcdstore's keys.go).
func groupKey(key string) bool {
	rest, ok := strings.CutPrefix(key, storePrefix)
	if !ok {
		return false
	}
	if strings.HasPrefix(rest, "groups/") {
		return true
	}
	shard, ok := strings.CutPrefix(rest, "shards/")
	if !ok {
		return false
	}
	_, tail, ok := strings.Cut(shard, "/")
	return ok && strings.HasPrefix(tail, "groups/")
}

// dumpRows reads what the two resources hold.
func (r *run) dumpRows(ctx context.Context) ([]check.Row, error) {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var rows []check.Row
	add := func(resource string, st []workload.Stored) {
		for _, s := range st {
			rows = append(rows, check.Row{Resource: resource, Partition: int32(s.Partition), Seq: s.Seq, Token: int64(s.Token),
				Worker: s.Worker, Member: s.Member, Order: s.Order})
		}
	}
	db, err := sql.Open("pgx", r.cfg.PostgresDSN)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	pg, err := workload.NewSQLResource(db, r.table)
	if err != nil {
		return nil, err
	}
	st, err := pg.Records(cctx)
	if err != nil {
		return nil, fmt.Errorf("chaos: PostgreSQL rows: %w", err)
	}
	add(check.ResourcePostgres, st)
	st, err = workload.NewEtcdResource(r.direct, fencePrefix).Records(cctx)
	if err != nil {
		return nil, fmt.Errorf("chaos: etcd rows: %w", err)
	}
	add(check.ResourceEtcd, st)
	return rows, nil
}

// mergeOffsets reads the committers' logs, one per life, skipping a line a
// kill tore: their commits and fetches, and their callbacks.
func (r *run) mergeOffsets() ([]check.OffsetOp, []check.Callback, error) {
	files, err := filepath.Glob(filepath.Join(r.cfg.Dir, "offsets", "*.jsonl"))
	if err != nil {
		return nil, nil, err
	}
	slices.Sort(files)
	var out []check.OffsetOp
	var cbs []check.Callback
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			var cb check.Callback
			if json.Unmarshal(sc.Bytes(), &cb) == nil && cb.Callback != "" {
				cbs = append(cbs, cb)
				continue
			}
			var op check.OffsetOp
			if json.Unmarshal(sc.Bytes(), &op) == nil {
				out = append(out, op)
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, nil, err
		}
	}
	return out, cbs, nil
}
