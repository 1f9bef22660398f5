package etcdstore

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"pgregory.net/rapid"

	"github.com/tenure-dev/tenure/coordinator"
)

var anyName = rapid.OneOf(
	rapid.SampledFrom([]string{"", "/", "%", "%25", "%2F", "a/b", "a%2Fb", "A", "\x00", "\xff"}),
	rapid.String(),
	rapid.Map(rapid.SliceOfN(rapid.Byte(), 0, 12), func(b []byte) string { return string(b) }),
)

// TestEscape: escape is injective and invertible, never yields a '/',
// and leaves names of unreserved characters as they are, in their order.
func TestEscape(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := anyName.Draw(t, "a"), anyName.Draw(t, "b")
		ea, eb := escape(a), escape(b)
		if strings.Contains(ea, "/") {
			t.Fatalf("escape(%q) = %q holds a '/'", a, ea)
		}
		if got, err := unescape(ea); err != nil || got != a {
			t.Fatalf("unescape(escape(%q)) = %q, %v", a, got, err)
		}
		if (a == b) != (ea == eb) {
			t.Fatalf("escape(%q) = %q and escape(%q) = %q", a, ea, b, eb)
		}
		plain := rapid.StringMatching(`[A-Za-z0-9._~-]{0,8}`)
		p, q := plain.Draw(t, "p"), plain.Draw(t, "q")
		if escape(p) != p || (p < q) != (escape(p) < escape(q)) {
			t.Fatalf("plain names %q, %q escape to %q, %q", p, q, escape(p), escape(q))
		}
	})
}

// TestUnescapeCanonical: only escape's own output decodes, so a name has
// one key and a key one name.
func TestUnescapeCanonical(t *testing.T) {
	for _, s := range []string{"%41", "%2f", "%", "%4", "%G0", "a/b", "a b", "\xff"} {
		if got, err := unescape(s); err == nil {
			t.Errorf("unescape(%q) = %q, want an error", s, got)
		}
	}
}

// TestKeysParse: every key parses back to its entity, a group's
// directory holds the keys of that group of that shard only, and a load
// reads the shard's groups and the topics, and nothing of another shard.
func TestKeysParse(t *testing.T) {
	layouts := []keys{prefixKeys("/p/"), newKeys("/p/", 7, 9), newKeys("/p/", 0, 9), newKeys("/p/", 70, 90)}
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.SampledFrom(layouts).Draw(t, "layout")
		g, h, name := anyName.Draw(t, "g"), anyName.Draw(t, "h"), anyName.Draw(t, "name")
		part := rapid.Int32().Draw(t, "partition")
		epoch := rapid.Int32Range(0, 1<<31-1).Draw(t, "epoch")
		in := func(key string, rs []keyRange) bool {
			return slices.ContainsFunc(rs, func(r keyRange) bool { return r.contains(key) })
		}
		own := parsedKey{sharded: k.sharded, shard: k.shard, group: g}
		with := func(kind keyKind, name string, part int32) parsedKey {
			p := own
			p.kind, p.name, p.partition = kind, name, part
			return p
		}
		for _, tc := range []struct {
			key  string
			want parsedKey
		}{
			{k.topic(name), parsedKey{kind: kindTopic, name: name}},
			{k.group(g), with(kindGroup, "", 0)},
			{k.member(g, name), with(kindMember, name, 0)},
			{k.assignment(g, name), with(kindAssignment, name, 0)},
			{k.offset(g, name, part), with(kindOffset, name, part)},
			{k.logEntry(g, epoch), parsedKey{kind: kindLog, group: g, partition: epoch}},
			{k.user(name, "SCRAM-SHA-256"), parsedKey{kind: kindUser, name: name, mechanism: "SCRAM-SHA-256"}},
			{k.fence(), parsedKey{kind: kindMeta}},
			{k.shardCount(), parsedKey{kind: kindMeta}},
		} {
			got, err := k.parse(tc.key)
			if err != nil || got != tc.want {
				t.Fatalf("parse(%q) = %+v, %v; want %+v", tc.key, got, err, tc.want)
			}
			isGroup := tc.want.kind == kindGroup || tc.want.kind == kindMember ||
				tc.want.kind == kindAssignment || tc.want.kind == kindOffset
			for _, k2 := range layouts {
				same := k2.sharded == k.sharded && k2.shard == k.shard
				if isGroup && k2.ownsGroup(got) != same {
					t.Fatalf("layout %+v owns key %q of layout %+v: %v", k2, tc.key, k, !same)
				}
				dir := k2.groupDir(h)
				if in := strings.HasPrefix(tc.key, dir); isGroup && in != (same && g == h) {
					t.Fatalf("key %q of group %q under the directory %q of group %q: %v", tc.key, g, dir, h, in)
				}
				rest := k2.groupRest(g)
				inRest := rest[0].contains(tc.key) || rest[1].contains(tc.key)
				if wantRest := same && isGroup && tc.want.kind != kindGroup; inRest != wantRest {
					t.Fatalf("key %q in the deletion ranges of group %q of %+v: %v, want %v", tc.key, g, k2, inRest, wantRest)
				}
				loaded := in(tc.key, k2.loadRanges())
				var want bool
				switch {
				case !k2.sharded:
					// The whole prefix but the logs (an unsharded
					// prefix has no shard keys: ErrShardCount).
					want = tc.want.kind != kindLog
				case tc.want.kind == kindTopic:
					want = true
				default:
					want = isGroup && same
				}
				if loaded != want {
					t.Fatalf("key %q read by a load of %+v: %v, want %v", tc.key, k2, loaded, want)
				}
			}
		}
	})
}

// TestKeysParseBad: keys of no layout, shard keys included, are refused.
func TestKeysParseBad(t *testing.T) {
	k := prefixKeys("/p/")
	for _, key := range []string{
		"/q/groups/g/group", "/p/groups/g", "/p/groups/g/what", "/p/other/x",
		"/p/shards/1", "/p/shards/1/g/group", "/p/shards/01/groups/g/group", "/p/shards/-1/groups/g/group",
		"/p/shards/x/groups/g/group", "/p/shards//groups/g/group", "/p/shards/2147483648/groups/g/group",
		"/p/shards/1/groups/g/offsets/t/01", "/p/shards/1/shards/1/groups/g/group",
	} {
		if got, err := k.parse(key); err == nil {
			t.Errorf("parse(%q) = %+v, want an error", key, got)
		}
	}
}

// TestDecideLayout: what New does with the format and shard count keys it
// reads, for every combination that matters.
func TestDecideLayout(t *testing.T) {
	kv := func(v string) *mvccpb.KeyValue { return &mvccpb.KeyValue{Value: []byte(v)} }
	for _, tc := range []struct {
		name          string
		format, count *mvccpb.KeyValue
		shards        int
		want          layoutWrites
		err           error
		errText       string
	}{
		{name: "new unsharded", shards: 1, want: layoutWrites{format: 5, count: true}},
		{name: "new sharded", shards: 8, want: layoutWrites{format: 5, count: true}},
		{name: "unsharded", format: kv("5"), count: kv("1"), shards: 1, want: layoutWrites{from: 5}},
		{name: "sharded", format: kv("5"), count: kv("8"), shards: 8, want: layoutWrites{from: 5}},
		{name: "unsharded at 3, raised to batches", format: kv("3"), count: kv("1"), shards: 1, want: layoutWrites{from: 3, format: 5}},
		{name: "sharded at 4, raised to batches", format: kv("4"), count: kv("8"), shards: 8, want: layoutWrites{from: 4, format: 5}},
		{name: "before the count", format: kv("3"), shards: 1, want: layoutWrites{from: 3, format: 5, count: true}},
		{name: "format 1", format: kv("1"), shards: 1, want: layoutWrites{from: 1, format: 5, count: true}},
		{name: "sharded at 3", format: kv("3"), count: kv("8"), shards: 8, want: layoutWrites{from: 3, format: 5}},
		{name: "unsharded at 4", format: kv("4"), count: kv("1"), shards: 1, want: layoutWrites{from: 4, format: 5}},
		{name: "sharded before the count", format: kv("3"), shards: 8, err: ErrShardCount},
		{name: "other count", format: kv("4"), count: kv("4"), shards: 8, err: ErrShardCount},
		{name: "unsharded on sharded", format: kv("4"), count: kv("4"), shards: 1, err: ErrShardCount},
		{name: "targets, raised by the set", format: kv("6"), count: kv("1"), shards: 1, want: layoutWrites{from: 6}},
		{name: "newer", format: kv("7"), count: kv("1"), shards: 1, err: ErrNewerFormat},
		{name: "newer before the count", format: kv("7"), shards: 8, err: ErrNewerFormat},
		{name: "bad format", format: kv("three"), shards: 1, errText: "not a format version"},
		{name: "bad count", format: kv("4"), count: kv("+8"), shards: 8, errText: "not a shard count"},
		{name: "count alone, recorded by the HA set", count: kv("8"), shards: 8, want: layoutWrites{format: 5}},
		{name: "count alone, unsharded", count: kv("1"), shards: 1, want: layoutWrites{format: 5}},
		{name: "count alone, another", count: kv("8"), shards: 2, err: ErrShardCount},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKeys("/p/", 0, tc.shards)
			got, err := decideLayout(k, tc.format, tc.count, openFormat, tc.shards)
			switch {
			case tc.err != nil && !errors.Is(err, tc.err), tc.errText != "" && (err == nil || !strings.Contains(err.Error(), tc.errText)):
				t.Fatalf("error %v, want %v %q", err, tc.err, tc.errText)
			case tc.err == nil && tc.errText == "" && (err != nil || got != tc.want):
				t.Fatalf("%+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestShardOption: Shard's range is checked as New would.
func TestShardOption(t *testing.T) {
	for _, tc := range []struct {
		index, count int
		ok           bool
	}{{0, 1, true}, {0, 2, true}, {299, 300, true}, {MaxShards - 1, MaxShards, true}, {0, MaxShards + 1, false}, {0, 0, false}, {-1, 4, false}, {4, 4, false}, {1, 1, false}, {0, -3, false}} {
		err := CheckOptions(Shard(tc.index, tc.count))
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidOption)) {
			t.Errorf("Shard(%d, %d): %v, want ok %v", tc.index, tc.count, err, tc.ok)
		}
	}
	if a, b := newKeys("/p/", 0, 1), prefixKeys("/p/"); a != b {
		t.Errorf("Shard(0, 1) keys %+v, want the unsharded %+v", a, b)
	}
}

func BenchmarkEncodeOffset(b *testing.B) {
	md := "checkpoint"
	r := &coordinator.OffsetRecord{Group: "g", Topic: "orders", Partition: 7, Offset: 1234567, LeaderEpoch: -1, Metadata: &md, Token: 16, MemberID: "hq0F3Jh_gGIwoTygd5badg"}
	b.ReportAllocs()
	for b.Loop() {
		encodeValue(r)
	}
}

func BenchmarkDecodeOffset(b *testing.B) {
	val := []byte(`{"o":1234567,"le":-1,"md":"checkpoint","k":16,"m":"hq0F3Jh_gGIwoTygd5badg"}`)
	pk := parsedKey{kind: kindOffset, group: "g", name: "orders", partition: 7}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeValue(pk, val); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeAssignment(b *testing.B) {
	val := []byte(`{"e":16,"pe":6,"o":[{"t":"orders","p":[11,12,43,44],"k":[16,16,16,16]}],"tg":[{"t":"orders","p":[11,12,43,44]}]}`)
	pk := parsedKey{kind: kindAssignment, group: "g", name: "hq0F3Jh_gGIwoTygd5badg"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeValue(pk, val); err != nil {
			b.Fatal(err)
		}
	}
}
