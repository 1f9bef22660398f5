package etcdstore

import (
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
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

// TestKeysParse: every key parses back to its entity, and a group's
// directory holds the keys of that group only.
func TestKeysParse(t *testing.T) {
	k := keys{"/p/"}
	rapid.Check(t, func(t *rapid.T) {
		g, h, name := anyName.Draw(t, "g"), anyName.Draw(t, "h"), anyName.Draw(t, "name")
		part := rapid.Int32().Draw(t, "partition")
		for _, tc := range []struct {
			key  string
			want parsedKey
		}{
			{k.topic(name), parsedKey{kind: kindTopic, name: name}},
			{k.group(g), parsedKey{kind: kindGroup, group: g}},
			{k.member(g, name), parsedKey{kind: kindMember, group: g, name: name}},
			{k.assignment(g, name), parsedKey{kind: kindAssignment, group: g, name: name}},
			{k.offset(g, name, part), parsedKey{kind: kindOffset, group: g, name: name, partition: part}},
		} {
			got, err := k.parse(tc.key)
			if err != nil || got != tc.want {
				t.Fatalf("parse(%q) = %+v, %v; want %+v", tc.key, got, err, tc.want)
			}
			dir := k.groupDir(h)
			in := strings.HasPrefix(tc.key, dir)
			if tc.want.kind != kindTopic && in != (g == h) {
				t.Fatalf("key %q of group %q under the directory %q of group %q: %v", tc.key, g, dir, h, in)
			}
			rest := k.groupRest(g)
			inRest := rest[0].contains(tc.key) || rest[1].contains(tc.key)
			if wantRest := tc.want.kind != kindTopic && tc.want.kind != kindGroup; inRest != wantRest {
				t.Fatalf("key %q in the deletion ranges of group %q: %v, want %v", tc.key, g, inRest, wantRest)
			}
		}
	})
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

// TestQuietCore: etcd's noise is dropped, its long strings cut, its
// warnings passed on.
func TestQuietCore(t *testing.T) {
	obs, logs := observer.New(zapcore.DebugLevel)
	closing := new(atomic.Bool)
	log := zap.New(&quietCore{Core: obs, closing: closing}).With(zap.String("component", "etcd"))
	log.Info("chatter")
	log.Warn("Running http and grpc server on single port. This is not recommended for production.")
	log.Warn("apply request took too long", zap.String("request", strings.Repeat("x", 5000)), zap.Int("n", 1))
	log.Error("setting up serving from embedded etcd failed.", zap.Error(errors.New("mux: server closed")))
	closing.Store(true)
	log.Error("setting up serving from embedded etcd failed.", zap.Error(errors.New("mux: server closed")))
	var got []string
	for _, e := range logs.All() {
		got = append(got, e.Message)
	}
	if want := []string{"apply request took too long", "setting up serving from embedded etcd failed."}; !slices.Equal(got, want) {
		t.Fatalf("passed %q, want %q", got, want)
	}
	req := logs.All()[0].ContextMap()["request"].(string)
	if len(req) > maxLogString+32 || !strings.HasSuffix(req, "(5000 bytes)") {
		t.Fatalf("a long string passed as %d bytes: ...%s", len(req), req[len(req)-20:])
	}
}
