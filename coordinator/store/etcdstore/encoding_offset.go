package etcdstore

import (
	"math"
	"strconv"

	"github.com/tenure-dev/tenure/coordinator"
)

// Offset values are most of what a store holds and of what a warm
// standby's watch delivers (every commit, to every node), and
// encoding/json takes about 4 µs and 12 allocations to read one. The
// values tenure writes have one shape, which decodeOffsetFast reads
// directly: {"o":N,"le":N,"md":"…","k":N,"m":"…","fr":N}, any field left out, in
// that order, no whitespace, strings of printable ASCII without escapes.
// Anything else (a version or "x" header, escapes, other bytes, another
// order, numbers JSON or the fields' types refuse) is not taken, and the
// general decoder reads it, accepting or refusing it as before: for every
// input the fast path takes, it gives what the general one gives
// (FuzzDecodeOffset checks this).

// Writing is the same in reverse: every offset commit is a value encoded,
// and encoding/json takes about as long as reading did (a struct, an
// encoder and its buffer for each). appendOffsetFast writes the same
// bytes for a record whose strings are printable ASCII without '"' or
// '\\' (JSON needs no escape in them, so encoding/json writes them as they
// are) and leaves any other record to the general encoder
// (FuzzEncodeOffset checks the two agree).

// appendOffsetFast appends r's value to dst as encodeValue would write
// it, if r's strings need no escape and no base64; ok is false, and dst
// as given, otherwise.
func appendOffsetFast(dst []byte, r *coordinator.OffsetRecord) (out []byte, ok bool) {
	if !plainASCII(r.MemberID) || r.Metadata != nil && !plainASCII(*r.Metadata) {
		return dst, false
	}
	out = append(dst, '{')
	sep := func() {
		if len(out) > len(dst)+1 {
			out = append(out, ',')
		}
	}
	if r.Offset != 0 {
		out = strconv.AppendInt(append(out, offsetFields[0]...), r.Offset, 10)
	}
	if r.LeaderEpoch != 0 {
		sep()
		out = strconv.AppendInt(append(out, offsetFields[1]...), int64(r.LeaderEpoch), 10)
	}
	if r.Metadata != nil {
		sep()
		out = append(append(append(append(out, offsetFields[2]...), '"'), *r.Metadata...), '"')
	}
	if r.Token != 0 {
		sep()
		out = strconv.AppendInt(append(out, offsetFields[3]...), int64(r.Token), 10)
	}
	if r.MemberID != "" {
		sep()
		out = append(append(append(append(out, offsetFields[4]...), '"'), r.MemberID...), '"')
	}
	return append(out, '}'), true
}

// plainASCII reports whether JSON writes s as it is: printable ASCII
// without '"' or '\\'. It runs on every member ID an offset commit
// writes, so it looks each byte up rather than testing four bounds.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if !plainByte[s[i]] {
			return false
		}
	}
	return true
}

// plainByte holds the bytes JSON writes as they are in a string: the
// printable ASCII ones but '"' and '\\'.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c <= 0x7e; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// decodeOffsetFast decodes data if it has the shape tenure writes.
func decodeOffsetFast(data []byte) (v offsetValue, ok bool) { return scanOffset(data, true) }

// scanOffset reads data as decodeOffsetFast says; with keep false it
// checks the strings without copying them (v's are left empty), so that
// checking a value costs no allocation: a read of a group's offsets
// checks every value of its batches but decodes only the winners'
// (offsetMerge).
func scanOffset(data []byte, keep bool) (v offsetValue, ok bool) {
	d := valueScanner{data: data}
	if !d.byte('{') {
		return v, false
	}
	if d.byte('}') {
		return v, d.end()
	}
	for i, field := range offsetFields {
		if !d.prefix(field) {
			continue
		}
		switch i {
		case 0:
			if v.Offset, ok = d.int(math.MinInt64, math.MaxInt64); !ok {
				return v, false
			}
		case 1:
			n, ok := d.int(math.MinInt32, math.MaxInt32)
			if !ok {
				return v, false
			}
			v.LeaderEpoch = int32(n)
		case 2:
			s, ok := d.str(keep)
			if !ok {
				return v, false
			}
			if keep {
				md := s // declared here: a pointer taken to s would put it on the heap even when not kept
				v.Metadata = &md
			}
		case 3:
			if v.Token, ok = d.int(math.MinInt64, math.MaxInt64); !ok {
				return v, false
			}
		case 4:
			if v.MemberID, ok = d.str(keep); !ok {
				return v, false
			}
		case 5:
			if v.Folded, ok = d.int(math.MinInt64, math.MaxInt64); !ok {
				return v, false
			}
		}
		if d.byte('}') {
			return v, d.end()
		}
		if !d.byte(',') {
			return v, false
		}
	}
	return v, false // a comma after the last field, or a field out of order
}

// offsetFields are offsetValue's keys, in the order encoding/json writes
// them, with their colons.
var offsetFields = [...]string{`"o":`, `"le":`, `"md":`, `"k":`, `"m":`, `"fr":`}

// valueScanner reads data from i on (the fast decoders of encoding_offset.go
// and encoding_group.go).
type valueScanner struct {
	data []byte
	i    int
}

func (d *valueScanner) end() bool { return d.i == len(d.data) }

func (d *valueScanner) byte(c byte) bool {
	if d.i < len(d.data) && d.data[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *valueScanner) prefix(s string) bool {
	if len(d.data)-d.i >= len(s) && string(d.data[d.i:d.i+len(s)]) == s {
		d.i += len(s)
		return true
	}
	return false
}

// int reads a JSON integer within [lo, hi]: an optional minus, then 0 or
// digits without a leading zero; no fraction or exponent (encoding/json
// refuses those for an integer field).
func (d *valueScanner) int(lo, hi int64) (int64, bool) {
	neg := d.byte('-')
	start := d.i
	var u uint64
	for d.i < len(d.data) && '0' <= d.data[d.i] && d.data[d.i] <= '9' {
		if u > (math.MaxUint64-9)/10 {
			return 0, false
		}
		u = u*10 + uint64(d.data[d.i]-'0')
		d.i++
	}
	n := d.i - start
	if n == 0 || n > 1 && d.data[start] == '0' {
		return 0, false
	}
	if neg {
		if u > uint64(math.MaxInt64)+1 || -int64(u-1)-1 < lo { // -int64(u) overflows at MinInt64
			return 0, false
		}
		return -int64(u-1) - 1, true
	}
	if u > uint64(hi) {
		return 0, false
	}
	return int64(u), true
}

// string reads a JSON string of printable ASCII without escapes.
func (d *valueScanner) string() (string, bool) { return d.str(true) }

// str reads a string as string does, returning it only if keep (it
// allocates).
func (d *valueScanner) str(keep bool) (string, bool) {
	if !d.byte('"') {
		return "", false
	}
	start := d.i
	for d.i < len(d.data) {
		switch c := d.data[d.i]; {
		case c == '"':
			var s string
			if keep {
				s = string(d.data[start:d.i])
			}
			d.i++
			return s, true
		case !plainByte[c]:
			return "", false
		}
		d.i++
	}
	return "", false
}
