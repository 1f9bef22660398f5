package etcdfence_test

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"pgregory.net/rapid"

	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/epoch/etcdfence"
	"github.com/tenure-dev/tenure/epoch/internal/fencetest"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// getValue returns the value of key, or "" and false if it is absent.
func getValue(t testing.TB, cli *clientv3.Client, key string) (string, bool) {
	t.Helper()
	resp, err := cli.Get(testenv.Context(t), key)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		return "", false
	}
	return string(resp.Kvs[0].Value), true
}

// TestPut walks one partition through the cases a fence must tell apart,
// checking after each write both the stored token and whether the effect
// landed.
func TestPut(t *testing.T) {
	cli := etcd.Client(t)
	ctx := testenv.Context(t)
	prefix := uniquePrefix("put")
	f := etcdfence.New(cli, prefix)
	const p epoch.Partition = 3
	data := prefix + "/data/3"

	steps := []struct {
		name    string
		token   epoch.Token
		stale   bool        // want a *StaleError
		current epoch.Token // StaleError.Current, or the stored token after an admitted write
	}{
		{name: "first write admitted", token: 5, current: 5},
		{name: "equal token admitted", token: 5, current: 5},
		{name: "lower token rejected", token: 4, stale: true, current: 5},
		{name: "higher token admitted", token: 9, current: 9},
		{name: "previous owner rejected", token: 5, stale: true, current: 9},
		{name: "much lower token rejected", token: 1, stale: true, current: 9},
		{name: "equal token admitted again", token: 9, current: 9},
	}
	lastApplied := ""
	for i, s := range steps {
		value := fmt.Sprintf("step %d token %d", i, s.token)
		resp, err := f.Put(ctx, p, s.token, clientv3.OpPut(data, value))
		if s.stale {
			if resp != nil {
				t.Errorf("%s: rejected Put returned a response", s.name)
			}
			fencetest.WantStale(t, err, p, s.token, s.current)
		} else {
			if err != nil {
				t.Fatalf("%s: Put: %v", s.name, err)
			}
			lastApplied = value
			if got := len(resp.Responses); got != 2 {
				t.Errorf("%s: %d responses, want 2 (effect, token)", s.name, got)
			}
		}
		if got, _ := getValue(t, cli, data); got != lastApplied {
			t.Fatalf("%s: effect key holds %q, want %q", s.name, got, lastApplied)
		}
		cur, err := f.Current(ctx, p)
		if err != nil {
			t.Fatalf("%s: Current: %v", s.name, err)
		}
		if cur != s.current {
			t.Fatalf("%s: Current = %v, want %v", s.name, cur, s.current)
		}
	}
}

// TestPartitionsAreIndependent checks that a token stored for one partition
// does not fence another.
func TestPartitionsAreIndependent(t *testing.T) {
	cli := etcd.Client(t)
	ctx := testenv.Context(t)
	f := etcdfence.New(cli, uniquePrefix("independent"))
	if err := f.Admit(ctx, 1, 100); err != nil {
		t.Fatal(err)
	}
	if err := f.Admit(ctx, 2, 1); err != nil {
		t.Fatalf("partition 2 fenced by partition 1's token: %v", err)
	}
	fencetest.WantStale(t, f.Admit(ctx, 1, 99), 1, 99, 100)
}

// TestFencesShareState checks that two Fences on the same prefix, through
// different clients, guard the same tokens: the fence lives in etcd.
func TestFencesShareState(t *testing.T) {
	prefix := uniquePrefix("shared")
	a := etcdfence.New(etcd.Client(t), prefix)
	b := etcdfence.New(etcd.Client(t), prefix+"/") // trailing slash ignored
	ctx := testenv.Context(t)
	if err := a.Admit(ctx, 0, 7); err != nil {
		t.Fatal(err)
	}
	fencetest.WantStale(t, b.Admit(ctx, 0, 6), 0, 6, 7)
	if a.Key(0) != b.Key(0) {
		t.Fatalf("keys differ: %q and %q", a.Key(0), b.Key(0))
	}
	if want := prefix + "/tokens/0"; a.Key(0) != want {
		t.Fatalf("Key(0) = %q, want %q", a.Key(0), want)
	}
}

// TestBadInput checks that input the fence refuses changes nothing in etcd.
func TestBadInput(t *testing.T) {
	cli := etcd.Client(t)
	ctx := testenv.Context(t)
	prefix := uniquePrefix("bad")
	f := etcdfence.New(cli, prefix)
	if err := f.Admit(ctx, 0, 10); err != nil {
		t.Fatal(err)
	}
	data := prefix + "/data/x"
	tests := []struct {
		name  string
		token epoch.Token
		ops   []clientv3.Op
		want  error
	}{
		{name: "zero token", token: 0, ops: []clientv3.Op{clientv3.OpPut(data, "v")}, want: epoch.ErrNoToken},
		{name: "no generation", token: -1, ops: []clientv3.Op{clientv3.OpPut(data, "v")}, want: epoch.ErrNoToken},
		{name: "most negative token", token: math.MinInt64, ops: []clientv3.Op{clientv3.OpPut(data, "v")}, want: epoch.ErrNoToken},
		{name: "put own token key", token: 11, ops: []clientv3.Op{clientv3.OpPut(f.Key(0), "v")}, want: etcdfence.ErrTokenKey},
		{name: "put other token key", token: 11, ops: []clientv3.Op{clientv3.OpPut(data, "v"), clientv3.OpPut(f.Key(1), "v")}, want: etcdfence.ErrTokenKey},
		{name: "delete token prefix", token: 11, ops: []clientv3.Op{clientv3.OpDelete(prefix+"/tokens/", clientv3.WithPrefix())}, want: etcdfence.ErrTokenKey},
		{name: "delete whole prefix", token: 11, ops: []clientv3.Op{clientv3.OpDelete(prefix, clientv3.WithPrefix())}, want: etcdfence.ErrTokenKey},
		{name: "delete from key", token: 11, ops: []clientv3.Op{clientv3.OpDelete(prefix, clientv3.WithFromKey())}, want: etcdfence.ErrTokenKey},
		{name: "delete range ending inside", token: 11, ops: []clientv3.Op{clientv3.OpDelete(prefix+"/a", clientv3.WithRange(prefix+"/tokens/1"))}, want: etcdfence.ErrTokenKey},
		{name: "token key in nested txn", token: 11, ops: []clientv3.Op{clientv3.OpTxn(nil, nil, []clientv3.Op{clientv3.OpPut(f.Key(0), "v")})}, want: etcdfence.ErrTokenKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := f.Put(ctx, 0, tt.token, tt.ops...)
			if !errors.Is(err, tt.want) || resp != nil {
				t.Fatalf("Put = %v, %v; want nil, error wrapping %v", resp, err, tt.want)
			}
			if _, ok := getValue(t, cli, data); ok {
				t.Fatalf("effect applied despite the error")
			}
			if cur, err := f.Current(ctx, 0); err != nil || cur != 10 {
				t.Fatalf("Current = %v, %v; want 10", cur, err)
			}
		})
	}
	// Not even a partition nobody has written yet admits a non-positive
	// token: it must not create the partition's key.
	for _, tok := range []epoch.Token{0, -1, math.MinInt64} {
		if err := f.Admit(ctx, 1, tok); !errors.Is(err, epoch.ErrNoToken) {
			t.Fatalf("Admit(%v) = %v, want ErrNoToken", tok, err)
		}
		if _, ok := getValue(t, cli, f.Key(1)); ok {
			t.Fatalf("Admit(%v) wrote the token key", tok)
		}
	}
}

// TestOpsAllowed checks that operations that only read token keys, or write
// beside them, pass the token-key check and run in the fenced transaction.
func TestOpsAllowed(t *testing.T) {
	cli := etcd.Client(t)
	ctx := testenv.Context(t)
	prefix := uniquePrefix("allowed")
	f := etcdfence.New(cli, prefix)
	if err := f.Admit(ctx, 4, 2); err != nil {
		t.Fatal(err)
	}
	resp, err := f.Put(ctx, 4, 3,
		clientv3.OpGet(prefix+"/tokens/", clientv3.WithPrefix()),
		clientv3.OpPut(prefix+"/tokens", "just before the token range"),
		clientv3.OpPut(prefix+"/tokens0", "just after the token range"),
		clientv3.OpDelete(prefix+"/data/", clientv3.WithPrefix()),
	)
	if err != nil {
		t.Fatal(err)
	}
	// The Get ran in the same transaction, before the token moved to 3.
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) != 1 || string(kvs[0].Key) != f.Key(4) {
		t.Fatalf("get in txn returned %v", kvs)
	}
	for _, k := range []string{prefix + "/tokens", prefix + "/tokens0"} {
		if _, ok := getValue(t, cli, k); !ok {
			t.Errorf("%q not written", k)
		}
	}
}

// TestTokenEncodingRange admits tokens across the whole positive int64 range
// in increasing order and checks every smaller one is then rejected: the
// stored bytes must compare like the numbers (byte boundaries such as 255 and
// 256 included). Non-positive tokens are refused at every stage, whatever is
// stored, and leave the stored token alone.
func TestTokenEncodingRange(t *testing.T) {
	cli := etcd.Client(t)
	ctx := testenv.Context(t)
	f := etcdfence.New(cli, uniquePrefix("range"))
	tokens := []epoch.Token{1, 9, 10, 255, 256, 1 << 40, math.MaxInt64 - 1, math.MaxInt64}
	invalid := []epoch.Token{0, -1, -256, -1 << 40, math.MinInt64}
	for i, tok := range tokens {
		if err := f.Admit(ctx, 0, tok); err != nil {
			t.Fatalf("Admit(%v) after %v: %v", tok, tokens[:i], err)
		}
		for _, older := range tokens[:i] {
			fencetest.WantStale(t, f.Admit(ctx, 0, older), 0, older, tok)
		}
		for _, bad := range invalid {
			if err := f.Admit(ctx, 0, bad); !errors.Is(err, epoch.ErrNoToken) {
				t.Fatalf("Admit(%v) at %v = %v, want ErrNoToken", bad, tok, err)
			}
		}
		if cur, err := f.Current(ctx, 0); err != nil || cur != tok {
			t.Fatalf("Current = %v, %v; want %v", cur, err, tok)
		}
	}
}

// effect is one write a concurrent writer attempted.
type effect struct {
	key       string
	partition epoch.Partition
	token     epoch.Token
	accepted  bool
	revision  int64 // header revision of an accepted write
}

// TestConcurrentWriters races writers with random tokens on a few partitions
// through several clients. Each write carries an effect key recording its
// token. Afterwards, per partition: exactly the accepted effects exist; in
// revision order their tokens never decrease; every rejection saw a newer
// token; and the stored token is the largest accepted one.
func TestConcurrentWriters(t *testing.T) {
	const (
		writers    = 8
		writes     = 30
		partitions = 3
		spread     = 5 // tokens drift upwards, as generations do, this far apart at any moment
	)
	clients := []*clientv3.Client{etcd.Client(t), etcd.Client(t), etcd.Client(t)}
	prefix := uniquePrefix("concurrent")
	ctx := testenv.Context(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)

	results := make([][]effect, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			f := etcdfence.New(clients[w%len(clients)], prefix)
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := range writes {
				e := effect{
					key:       fmt.Sprintf("%s/effects/%d-%d", prefix, w, i),
					partition: epoch.Partition(rng.IntN(partitions)),
					token:     epoch.Token(1 + i/2 + rng.IntN(spread)),
				}
				resp, err := f.Put(ctx, e.partition, e.token, clientv3.OpPut(e.key, strconv.FormatInt(int64(e.token), 10)))
				accepted, ok := fencetest.Racing(t, err, e.token)
				if !ok {
					return
				}
				if accepted {
					e.accepted = true
					e.revision = resp.Header.Revision
				}
				results[w] = append(results[w], e)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	byPartition := make(map[epoch.Partition][]effect)
	attempted := make(map[string]effect)
	for _, rs := range results {
		for _, e := range rs {
			attempted[e.key] = e
			if e.accepted {
				byPartition[e.partition] = append(byPartition[e.partition], e)
			}
		}
	}

	// What etcd holds must be exactly the accepted effects, at the revisions
	// their transactions reported.
	resp, err := clients[0].Get(ctx, prefix+"/effects/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	stored := 0
	for _, kv := range resp.Kvs {
		e, ok := attempted[string(kv.Key)]
		switch {
		case !ok:
			t.Errorf("unexpected key %q", kv.Key)
		case !e.accepted:
			t.Errorf("rejected effect %q (token %v) was applied", kv.Key, e.token)
		case kv.ModRevision != e.revision:
			t.Errorf("effect %q at revision %d, its txn reported %d", kv.Key, kv.ModRevision, e.revision)
		default:
			stored++
		}
	}
	accepted := 0
	for _, es := range byPartition {
		accepted += len(es)
	}
	if stored != accepted {
		t.Errorf("%d effects stored, %d accepted", stored, accepted)
	}

	f := etcdfence.New(clients[0], prefix)
	for p := range epoch.Partition(partitions) {
		es := byPartition[p]
		slices.SortFunc(es, func(a, b effect) int { return cmp.Compare(a.revision, b.revision) })
		var maxTok epoch.Token
		for i, e := range es {
			if i > 0 && e.token < es[i-1].token {
				t.Errorf("partition %d: token %v accepted at revision %d after %v at %d", p, e.token, e.revision, es[i-1].token, es[i-1].revision)
			}
			maxTok = max(maxTok, e.token)
		}
		cur, err := f.Current(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if cur != maxTok {
			t.Errorf("partition %d: stored token %v, largest accepted %v", p, cur, maxTok)
		}
		t.Logf("partition %d: %d accepted, final token %v", p, len(es), cur)
	}
}

// TestModel checks the fence against a naive model (a map of the largest
// admitted token per partition) over random sequences of writes and reads,
// with tokens drawn from the whole int64 range: the model refuses zero and
// negative tokens with ErrNoToken, writing nothing, and otherwise admits a
// token unless it is below the largest one admitted.
func TestModel(t *testing.T) {
	cli := etcd.Client(t)
	ctx := testenv.Context(t)
	tokenGen := rapid.OneOf(
		rapid.Int64Range(-2, 8),
		rapid.SampledFrom([]int64{math.MinInt64, -1, math.MaxInt64, 255, 256}),
		rapid.Int64(),
	)
	rapid.Check(t, func(rt *rapid.T) {
		prefix := uniquePrefix("model")
		f := etcdfence.New(cli, prefix)
		model := fencetest.Model{}
		effects := map[epoch.Partition]string{}
		steps := rapid.IntRange(1, 12).Draw(rt, "steps")
		for i := range steps {
			p := epoch.Partition(rapid.IntRange(0, 2).Draw(rt, "partition"))
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0: // read
				got, err := f.Current(ctx, p)
				if err != nil || got != model[p] {
					rt.Fatalf("Current(%d) = %v, %v; model %v", p, got, err, model[p])
				}
			default: // guarded write
				tok := epoch.Token(tokenGen.Draw(rt, "token"))
				value := strconv.Itoa(i)
				key := prefix + "/data/" + strconv.Itoa(int(p))
				_, err := f.Put(ctx, p, tok, clientv3.OpPut(key, value))
				admitted, want := model.Check(p, tok, err)
				if want != "" {
					rt.Fatalf("Put(%d, %v) = %v, want %s", p, tok, err, want)
				}
				if admitted {
					effects[p] = value
				}
			}
		}
		resp, err := cli.Get(ctx, prefix+"/data/", clientv3.WithPrefix())
		if err != nil {
			rt.Fatal(err)
		}
		got := map[epoch.Partition]string{}
		for _, kv := range resp.Kvs {
			n, _ := strconv.Atoi(strings.TrimPrefix(string(kv.Key), prefix+"/data/"))
			got[epoch.Partition(n)] = string(kv.Value)
		}
		if fmt.Sprint(got) != fmt.Sprint(effects) {
			rt.Fatalf("effects %v, model %v", got, effects)
		}
	})
}

// TestAttacks runs the attack table (fencetest.Attacks): every write goes
// through Put with an effect, a key of its own, and a refused one must
// write neither its effect nor its token.
func TestAttacks(t *testing.T) {
	cli := etcd.Client(t)
	fencetest.Attacks(t, func(t *testing.T, v *epoch.Verifier) fencetest.Target {
		ctx := testenv.Context(t)
		prefix := uniquePrefix("attacks")
		f := etcdfence.New(cli, prefix, etcdfence.WithVerifier(v))
		n := 0
		effect := func() clientv3.Op {
			n++
			return clientv3.OpPut(prefix+"/data/"+strconv.Itoa(n), "effect")
		}
		return fencetest.Target{
			Admit: func(p epoch.Partition, tok epoch.Token) error {
				_, err := f.Put(ctx, p, tok, effect())
				return err
			},
			AdmitSigned: func(p epoch.Partition, st epoch.SignedToken) error {
				_, err := f.PutSigned(ctx, p, st, effect())
				return err
			},
			Current: func(p epoch.Partition) epoch.Token {
				cur, err := f.Current(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				return cur
			},
			Effects: func() int {
				resp, err := cli.Get(ctx, prefix+"/data/", clientv3.WithPrefix(), clientv3.WithCountOnly())
				if err != nil {
					t.Fatal(err)
				}
				return int(resp.Count)
			},
		}
	})
}
