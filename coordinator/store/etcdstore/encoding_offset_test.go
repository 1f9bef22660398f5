package etcdstore

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"testing"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/epoch"
)

// FuzzDecodeOffset checks that the fast path takes only what the general
// decoder accepts, and reads it alike.
func FuzzDecodeOffset(f *testing.F) {
	md := "checkpoint"
	for _, r := range []*coordinator.OffsetRecord{
		{Offset: 1234567, LeaderEpoch: -1, Metadata: &md, Token: 16, MemberID: "hq0F3Jh_gGIwoTygd5badg"},
		{Offset: math.MaxInt64, LeaderEpoch: math.MinInt32, Token: math.MinInt64},
		{Offset: -1, LeaderEpoch: math.MaxInt32, Metadata: new(string)},
		{MemberID: "\xff"},
		{MemberID: `a"b\c`},
		{},
	} {
		f.Add(encodeValue(r))
	}
	for _, s := range []string{
		`{}`, ` {}`, `{"o":1,}`, `{"o":01}`, `{"o":-0}`, `{"o":1.0}`, `{"o":1e3}`, `{"O":1}`, `{"o":1,"o":2}`,
		`{"le":2147483648}`, `{"o":9223372036854775808}`, `{"o":-9223372036854775809}`, `{"md":null}`,
		`{"k":1,"o":2}`, `{"v":1,"o":2}`, `{"x":true,"m":"YQ=="}`, `{"m":"\u0041"}`, `{"o":1}x`, `{"o":1} `,
		`{"o":` + strconv.FormatInt(math.MinInt64, 10) + `}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// checkOffset, which skips the decoding where it can, says what
		// decodeOffset says.
		r, fr, err := decodeOffset("g", "t", 1, data)
		cr, cfr, cerr := checkOffset("g", "t", 1, data)
		switch {
		case (err != nil) != (cerr != nil):
			t.Fatalf("%q: decodeOffset says %v, checkOffset %v", data, err, cerr)
		case fr != cfr:
			t.Fatalf("%q: decodeOffset reads fold order %d, checkOffset %d", data, fr, cfr)
		case cr != nil && !reflect.DeepEqual(cr, r):
			t.Fatalf("%q: decodeOffset reads %+v, checkOffset %+v", data, r, cr)
		}
		fast, ok := decodeOffsetFast(data)
		if !ok {
			return
		}
		if _, kept := scanOffset(data, false); !kept {
			t.Fatalf("%q: the fast path takes it only when it keeps the strings", data)
		}
		var slow offsetValue
		if err := unmarshal(data, &slow); err != nil {
			t.Fatalf("the fast path took %q, which the general decoder refuses: %v", data, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q: the fast path read %+v, the general decoder %+v", data, fast, slow)
		}
	})
}

// TestDecodeOffsetFastTakes checks that the fast path takes what tenure
// writes (else it would save nothing) and leaves what it must.
func TestDecodeOffsetFastTakes(t *testing.T) {
	md := "checkpoint"
	for _, r := range []*coordinator.OffsetRecord{
		{Offset: 1234567, LeaderEpoch: -1, Metadata: &md, Token: 16, MemberID: "hq0F3Jh_gGIwoTygd5badg"},
		{Offset: math.MaxInt64, LeaderEpoch: math.MinInt32, Token: math.MinInt64},
		{Offset: -1, Metadata: new(string)},
		{},
	} {
		data := encodeValue(r)
		v, ok := decodeOffsetFast(data)
		if !ok {
			t.Errorf("%s: not taken", data)
			continue
		}
		got := &coordinator.OffsetRecord{Offset: v.Offset, LeaderEpoch: v.LeaderEpoch, Metadata: v.Metadata,
			Token: epoch.Token(v.Token), MemberID: v.MemberID}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("%s: read %+v, want %+v", data, got, r)
		}
	}
	for _, s := range []string{`{"x":true,"m":"/w=="}`, `{"v":3,"o":1}`, `{"m":"\u0041"}`, `{"o":1e3}`, `{"md":null}`} {
		if _, ok := decodeOffsetFast([]byte(s)); ok {
			t.Errorf("%s: taken; the general decoder must read it", s)
		}
	}
}

// TestPlainASCII checks plainASCII and the fast decoder's strings against
// encoding/json for every byte value, at either end and in the middle of
// a member ID: plain exactly when encoding/json (without HTML escapes,
// as encodeValue writes) writes the byte as itself, but for DEL, which
// it leaves as is too and the fast paths leave to it (not printable),
// and read back by the fast decoder exactly then.
func TestPlainASCII(t *testing.T) {
	for c := range 256 {
		b := string([]byte{byte(c)})
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(b); err != nil {
			t.Fatal(err)
		}
		want := buf.String() == `"`+b+`"`+"\n" && c != 0x7f
		for _, s := range []string{b, b + "hq0F3Jh", "hq0F3Jh" + b, "hq0F3Jh" + b + "_gGIwoTygd5badg"} {
			if got := plainASCII(s); got != want {
				t.Errorf("plainASCII(%q) = %v, want %v (encoding/json writes %s)", s, got, want, buf.Bytes())
			}
			v, ok := decodeOffsetFast([]byte(`{"m":"` + s + `"}`))
			if c != '"' && (ok != want || ok && v.MemberID != s) {
				t.Errorf("decodeOffsetFast of member %q: %+v, %v; want taken %v", s, v, ok, want)
			}
		}
	}
}

// FuzzEncodeOffset checks that the fast encoder writes what the general
// one writes, byte for byte, and takes every record whose strings are
// plain ASCII (else it would save nothing).
func FuzzEncodeOffset(f *testing.F) {
	f.Add(int64(1234567), int32(-1), true, "checkpoint", int64(16), "hq0F3Jh_gGIwoTygd5badg")
	f.Add(int64(math.MaxInt64), int32(math.MinInt32), false, "", int64(math.MinInt64), "")
	f.Add(int64(-1), int32(0), true, "", int64(0), "\xff")
	f.Add(int64(0), int32(7), true, `a"b\c`, int64(1), "<&>\x7f")
	f.Add(int64(0), int32(0), false, "", int64(0), "\n")
	f.Fuzz(func(t *testing.T, offset int64, le int32, hasMD bool, md string, token int64, member string) {
		r := &coordinator.OffsetRecord{Offset: offset, LeaderEpoch: le, Token: epoch.Token(token), MemberID: member}
		if hasMD {
			r.Metadata = &md
		}
		want := marshalOffset(r)
		got, ok := appendOffsetFast([]byte("prefix"), r)
		checkFastEncoder(t, r, want, got, ok, plainASCII(member) && (!hasMD || plainASCII(md)))
		if ok && offsetValueString(r) != string(want) {
			t.Fatalf("%+v: offsetValueString is %s, want %s", r, offsetValueString(r), want)
		}
	})
}

// offsetValueString is encodeValue(r) as a string, by the fast path when
// it takes r, as a batch line holds it.
func offsetValueString(r *coordinator.OffsetRecord) string {
	if b, ok := appendOffsetFast(nil, r); ok {
		return string(b)
	}
	return string(encodeValue(r))
}

// checkFastEncoder checks what a fast encoder did with r, given the bytes
// it appended to "prefix" (got) and whether it took r (ok): it takes r
// exactly when r's strings are plain, writes nothing when it does not,
// and writes the general encoder's bytes (want) when it does, which are
// also what encodeValue writes.
func checkFastEncoder(t *testing.T, r coordinator.Record, want, got []byte, ok, plain bool) {
	t.Helper()
	switch {
	case ok != plain:
		t.Fatalf("%+v: taken %v, want %v", r, ok, plain)
	case !ok && string(got) != "prefix":
		t.Fatalf("%+v: not taken, but the buffer became %q", r, got)
	case ok && string(got) != "prefix"+string(want):
		t.Fatalf("%+v: the fast encoder wrote\n%s\nthe general one\n%s", r, got[len("prefix"):], want)
	}
	if string(encodeValue(r)) != string(want) {
		t.Fatalf("%+v: encodeValue wrote %s, the general encoder %s", r, encodeValue(r), want)
	}
}
