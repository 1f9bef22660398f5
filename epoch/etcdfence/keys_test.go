package etcdfence

import (
	"bytes"
	"cmp"
	"testing"

	"pgregory.net/rapid"

	"github.com/tenure-dev/tenure/epoch"
)

// TestTokenEncodingOrder checks the property etcd's value comparison relies
// on: encoded tokens compare as bytes exactly as the tokens compare as
// numbers, and decoding gives the token back.
func TestTokenEncodingOrder(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		a := epoch.Token(rapid.Int64().Draw(rt, "a"))
		b := epoch.Token(rapid.Int64().Draw(rt, "b"))
		ea, eb := encodeToken(a), encodeToken(b)
		if got, want := bytes.Compare([]byte(ea), []byte(eb)), cmp.Compare(a, b); got != want {
			rt.Fatalf("bytes.Compare(enc(%d), enc(%d)) = %d, want %d", a, b, got, want)
		}
		back, err := decodeToken("k", []byte(ea))
		if err != nil || back != a {
			rt.Fatalf("decode(encode(%d)) = %d, %v", a, back, err)
		}
	})
}

func TestDecodeTokenRejectsBadLength(t *testing.T) {
	for _, v := range []string{"", "1234567", "123456789", "42"} {
		if _, err := decodeToken("k", []byte(v)); err == nil {
			t.Errorf("decodeToken(%q) accepted", v)
		}
	}
}

// TestOverlaps checks the range test against a brute-force one over a small
// alphabet, where every key of interest can be enumerated.
func TestOverlaps(t *testing.T) {
	alphabet := []byte{0, 'a', 'b', 0xff}
	var keys [][]byte
	var gen func(prefix []byte, n int)
	gen = func(prefix []byte, n int) {
		keys = append(keys, bytes.Clone(prefix))
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			gen(append(bytes.Clone(prefix), c), n-1)
		}
	}
	gen(nil, 3)
	in := func(k, lo, hi []byte) bool {
		return bytes.Compare(k, lo) >= 0 && (hi == nil || bytes.Compare(k, hi) < 0)
	}
	rapid.Check(t, func(rt *rapid.T) {
		pick := rapid.SampledFrom(keys)
		lo := pick.Draw(rt, "lo")
		if len(lo) == 0 {
			lo = []byte{'a'}
		}
		hi := prefixEnd(lo)
		key := pick.Draw(rt, "key")
		end := rapid.OneOf(rapid.Just([]byte(nil)), rapid.Just([]byte{0}), pick).Draw(rt, "end")
		if len(key) == 0 {
			key = []byte{0} // etcd has no empty key
		}
		if len(end) > 1 || (len(end) == 1 && end[0] != 0) {
			if bytes.Compare(end, key) <= 0 {
				return // not a valid etcd range
			}
		}
		// Brute force: the op's range meets [lo, hi) iff one of the
		// enumerated keys (which include lo) lies in both.
		want := false
		for _, k := range keys {
			var inOp bool
			switch {
			case len(end) == 0:
				inOp = bytes.Equal(k, key)
			case len(end) == 1 && end[0] == 0:
				inOp = bytes.Compare(k, key) >= 0
			default:
				inOp = bytes.Compare(k, key) >= 0 && bytes.Compare(k, end) < 0
			}
			if inOp && in(k, lo, hi) {
				want = true
				break
			}
		}
		if got := overlaps(key, end, lo, hi); got != want {
			rt.Fatalf("overlaps(%q, %q, %q, %q) = %v, want %v", key, end, lo, hi, got, want)
		}
	})
}

func TestPrefixEnd(t *testing.T) {
	tests := []struct{ in, want []byte }{
		{[]byte("a/tokens/"), []byte("a/tokens0")},
		{[]byte{'a', 0xff}, []byte{'b'}},
		{[]byte{0xff, 0xff}, nil},
	}
	for _, tt := range tests {
		if got := prefixEnd(tt.in); !bytes.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
			t.Errorf("prefixEnd(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
