package etcdstore

import (
	"encoding/base64"
	"math"
	"strconv"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/epoch"
)

// A join writes a group value (its epoch bump, with the targets it moved),
// a member value and, as the group reconciles, a few assignment values per
// member (about fourteen when the targets went out in them too), and every
// node of a set decodes each of them as its watch delivers it (the
// mirror). With
// encoding/json these took a fifth of a node's CPU in BenchmarkJoin, the
// encoding another sixteenth. The values tenure writes have one shape each,
// which the functions here write and read directly, as encoding_offset.go
// does for offsets: fields in the struct's order, zero values left out, no
// whitespace, strings of printable ASCII without '"' or '\\'. A record with
// any other string is left to the general encoder (it may need escapes or
// the base64 fallback), and a value of any other shape (an "x" header,
// escapes, whitespace, null, another order, a number the field's type
// refuses) to the general decoder, which accepts or refuses it as before.
// For every record the fast encoder takes, it writes the general one's
// bytes; for every value the fast decoder takes, it reads what the general
// one reads (FuzzEncodeGroupValues, FuzzDecodeGroupValues).

// groupFields, targetFields, memberFields, assignmentFields and runFields
// are the keys of groupValue, targetValue, memberValue, assignmentValue
// and tpRun in the order
// encoding/json writes them, with their colons; "x" is left out, so that
// a value with it goes to the general decoder.
var (
	groupFields      = [...]string{`"v":`, `"t":`, `"e":`, `"pt":`, `"p":`, `"l":`, `"s":`, `"d":`, `"tg":`}
	targetFields     = [...]string{`"m":`, `"t":`}
	memberFields     = [...]string{`"v":`, `"i":`, `"c":`, `"h":`, `"r":`, `"st":`, `"rt":`, `"ts":`, `"re":`, `"sa":`, `"ps":`, `"dr":`, `"rd":`}
	protocolFields   = [...]string{`"n":`, `"m":`}
	assignmentFields = [...]string{`"v":`, `"e":`, `"pe":`, `"o":`, `"pv":`, `"pn":`, `"rv":`, `"tg":`, `"raw":`}
	runFields        = [...]string{`"t":`, `"p":`, `"k":`}
)

// objectWriter appends a JSON object's fields to b, with the commas
// between them.
type objectWriter struct {
	b     []byte
	start int // len(b) after the '{'
}

func newObjectWriter(dst []byte) objectWriter {
	b := append(dst, '{')
	return objectWriter{b: b, start: len(b)}
}

func (w *objectWriter) key(k string) {
	if len(w.b) > w.start {
		w.b = append(w.b, ',')
	}
	w.b = append(w.b, k...)
}

func (w *objectWriter) int(k string, n int64) {
	if n != 0 {
		w.key(k)
		w.b = strconv.AppendInt(w.b, n, 10)
	}
}

func (w *objectWriter) str(k, s string) {
	if s != "" {
		w.key(k)
		w.b = appendPlainString(w.b, s)
	}
}

func (w *objectWriter) bool(k string, v bool) {
	if v {
		w.key(k)
		w.b = append(w.b, "true"...)
	}
}

// bytes writes a []byte field as encoding/json does: base64, and "" for
// an empty slice that is not nil.
func (w *objectWriter) bytes(k string, v []byte) {
	if v != nil {
		w.key(k)
		w.b = append(w.b, '"')
		w.b = base64.StdEncoding.AppendEncode(w.b, v)
		w.b = append(w.b, '"')
	}
}

func (w *objectWriter) end() []byte { return append(w.b, '}') }

// appendPlainString appends s, which plainASCII took, as a JSON string.
func appendPlainString(b []byte, s string) []byte {
	return append(append(append(b, '"'), s...), '"')
}

// appendGroupFast appends r's value as encodeValue writes it, if its
// strings are plain.
func appendGroupFast(dst []byte, r *coordinator.GroupRecord) ([]byte, bool) {
	if !plainASCII(r.ProtocolType) || !plainASCII(r.Protocol) || !plainASCII(r.Leader) || !plainASCII(r.State) {
		return dst, false
	}
	for _, t := range r.Targets {
		if !plainASCII(t.MemberID) {
			return dst, false
		}
		for _, p := range t.Target {
			if !plainASCII(p.Topic) {
				return dst, false
			}
		}
	}
	w := newObjectWriter(dst)
	f := &groupFields
	if r.Targets != nil {
		w.int(f[0], 3)
	}
	w.int(f[1], int64(uint8(r.Type)))
	w.int(f[2], int64(r.Epoch))
	w.str(f[3], r.ProtocolType)
	w.str(f[4], r.Protocol)
	w.str(f[5], r.Leader)
	w.str(f[6], r.State)
	w.bool(f[7], r.Deleted)
	if r.Targets != nil {
		w.key(f[8])
		w.b = append(w.b, '[')
		for i, t := range r.Targets {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			tw := newObjectWriter(w.b)
			tw.key(targetFields[0])
			tw.b = appendPlainString(tw.b, t.MemberID)
			if t.Target != nil {
				tw.key(targetFields[1])
				tw.b = appendRuns(tw.b, t.Target, tpOf, false)
			}
			w.b = tw.end()
		}
		w.b = append(w.b, ']')
	}
	return w.end(), true
}

// appendMemberFast appends r's value as encodeValue writes it, if its
// strings are plain.
func appendMemberFast(dst []byte, r *coordinator.MemberRecord) ([]byte, bool) {
	for _, s := range [...]string{r.InstanceID, r.ClientID, r.ClientHost, r.RackID, r.TopicRegex, r.ServerAssignor} {
		if !plainASCII(s) {
			return dst, false
		}
	}
	for _, s := range r.Topics {
		if !plainASCII(s) {
			return dst, false
		}
	}
	for _, p := range r.Protocols {
		if !plainASCII(p.Name) {
			return dst, false
		}
	}
	w := newObjectWriter(dst)
	f := &memberFields
	if r.Drained || r.RemoveWhenDrained {
		w.int(f[0], 2)
	}
	w.str(f[1], r.InstanceID)
	w.str(f[2], r.ClientID)
	w.str(f[3], r.ClientHost)
	w.str(f[4], r.RackID)
	w.int(f[5], int64(r.SessionTimeout))
	w.int(f[6], int64(r.RebalanceTimeout))
	if r.Topics != nil {
		w.key(f[7])
		w.b = append(w.b, '[')
		for i, t := range r.Topics {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = appendPlainString(w.b, t)
		}
		w.b = append(w.b, ']')
	}
	w.str(f[8], r.TopicRegex)
	w.str(f[9], r.ServerAssignor)
	if r.Protocols != nil {
		w.key(f[10])
		w.b = append(w.b, '[')
		for i, p := range r.Protocols {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			pw := newObjectWriter(w.b)
			pw.str(protocolFields[0], p.Name)
			pw.bytes(protocolFields[1], p.Metadata)
			w.b = pw.end()
		}
		w.b = append(w.b, ']')
	}
	w.bool(f[11], r.Drained)
	w.bool(f[12], r.RemoveWhenDrained)
	return w.end(), true
}

// appendAssignmentFast appends r's value as encodeValue writes it, if its
// topic names are plain.
func appendAssignmentFast(dst []byte, r *coordinator.AssignmentRecord) ([]byte, bool) {
	for _, p := range r.Owned {
		if !plainASCII(p.Topic) {
			return dst, false
		}
	}
	for _, p := range r.Provisional {
		if !plainASCII(p.Topic) {
			return dst, false
		}
	}
	for _, l := range [...][]coordinator.TopicPartition{r.Pending, r.Revoking, r.Target} {
		for _, p := range l {
			if !plainASCII(p.Topic) {
				return dst, false
			}
		}
	}
	w := newObjectWriter(dst)
	f := &assignmentFields
	w.int(f[1], int64(r.MemberEpoch))
	w.int(f[2], int64(r.PrevEpoch))
	if r.Owned != nil {
		w.key(f[3])
		w.b = appendRuns(w.b, r.Owned, func(p coordinator.OwnedPartition) (string, int32, int64) {
			return p.Topic, p.Partition, int64(p.Token)
		}, true)
	}
	if r.Provisional != nil {
		w.key(f[4])
		w.b = appendRuns(w.b, r.Provisional, func(p coordinator.ProvisionalPartition) (string, int32, int64) {
			return p.Topic, p.Partition, int64(p.Floor)
		}, true)
	}
	for i, l := range [...][]coordinator.TopicPartition{r.Pending, r.Revoking, r.Target} {
		if l != nil {
			w.key(f[5+i])
			w.b = appendRuns(w.b, l, tpOf, false)
		}
	}
	w.bytes(f[8], r.Raw)
	return w.end(), true
}

// appendRuns writes ps as runs splits it, encoded: an array of
// {"t":…,"p":[…],"k":[…]}, "k" only withK.
func appendRuns[P any](b []byte, ps []P, split func(P) (string, int32, int64), withK bool) []byte {
	b = append(b, '[')
	for i := 0; i < len(ps); {
		t, _, _ := split(ps[i])
		j := i + 1
		for j < len(ps) {
			if tj, _, _ := split(ps[j]); tj != t {
				break
			}
			j++
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = appendPlainString(append(b, runFields[0]...), t)
		b = append(append(b, ','), runFields[1]...)
		b = append(b, '[')
		for n, p := range ps[i:j] {
			if n > 0 {
				b = append(b, ',')
			}
			_, part, _ := split(p)
			b = strconv.AppendInt(b, int64(part), 10)
		}
		b = append(b, ']')
		if withK {
			b = append(append(b, ','), runFields[2]...)
			b = append(b, '[')
			for n, p := range ps[i:j] {
				if n > 0 {
					b = append(b, ',')
				}
				_, _, k := split(p)
				b = strconv.AppendInt(b, k, 10)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
		i = j
	}
	return append(b, ']')
}

// The decoders read objects and arrays with open and next, not with
// callbacks: a closure would move the scanner, and the runs' scratch
// list with it, to the heap at every value.

// decodeGroupFast decodes data if it has the shape tenure writes.
func decodeGroupFast(data []byte) (v groupValue, ok bool) {
	d := runScanner{valueScanner: valueScanner{data: data}}
	done, ok := d.open('{', '}')
	for i := 0; ok && !done; i++ {
		if i = d.key(groupFields[:], i); i < 0 {
			return v, false
		}
		switch i {
		case 0:
			v.V, ok = d.version()
		case 1:
			var n int64
			n, ok = d.int(0, math.MaxUint8)
			v.Type = uint8(n)
		case 2:
			v.Epoch, ok = d.int32()
		case 3:
			v.ProtocolType, ok = d.string()
		case 4:
			v.Protocol, ok = d.string()
		case 5:
			v.Leader, ok = d.string()
		case 6:
			v.State, ok = d.string()
		case 7:
			v.Deleted, ok = d.bool()
		case 8:
			v.Targets, ok = d.targets()
		}
		if ok {
			done, ok = d.next('}')
		}
	}
	return v, ok && d.end()
}

// targets reads a group value's targets as the general decoder reads them.
func (d *runScanner) targets() ([]targetValue, bool) {
	return list(&d.valueScanner, func() (t targetValue, ok bool) {
		ok = d.object(targetFields[:], func(i int) (ok bool) {
			if i == 0 {
				t.Member, ok = d.string()
			} else {
				t.Target, ok = d.tpRuns()
			}
			return ok
		})
		return t, ok
	})
}

// tpRuns reads an array of runs as the general decoder reads it into
// tpRuns (runs reads the entries they stand for instead).
func (d *runScanner) tpRuns() ([]tpRun, bool) {
	return list(&d.valueScanner, func() (r tpRun, ok bool) {
		ok = d.object(runFields[:], func(i int) (ok bool) {
			switch i {
			case 0:
				r.Topic, ok = d.topicName()
			case 1:
				r.Partitions, ok = list(&d.valueScanner, d.int32)
			case 2:
				r.K, ok = list(&d.valueScanner, d.int64)
			}
			return ok
		})
		return r, ok
	})
}

// decodeMemberFast decodes data if it has the shape tenure writes.
func decodeMemberFast(data []byte) (v memberValue, ok bool) {
	d := valueScanner{data: data}
	done, ok := d.open('{', '}')
	for i := 0; ok && !done; i++ {
		if i = d.key(memberFields[:], i); i < 0 {
			return v, false
		}
		switch i {
		case 0:
			v.V, ok = d.version()
		case 1:
			v.InstanceID, ok = d.string()
		case 2:
			v.ClientID, ok = d.string()
		case 3:
			v.ClientHost, ok = d.string()
		case 4:
			v.RackID, ok = d.string()
		case 5:
			v.SessionTimeout, ok = d.int(math.MinInt64, math.MaxInt64)
		case 6:
			v.RebalanceTimeout, ok = d.int(math.MinInt64, math.MaxInt64)
		case 7:
			v.Topics, ok = d.strings()
		case 8:
			v.TopicRegex, ok = d.string()
		case 9:
			v.ServerAssignor, ok = d.string()
		case 10:
			v.Protocols, ok = d.protocols()
		case 11:
			v.Drained, ok = d.bool()
		case 12:
			v.RemoveDrained, ok = d.bool()
		}
		if ok {
			done, ok = d.next('}')
		}
	}
	return v, ok && d.end()
}

// decodeAssignmentFast decodes data, the value of member's assignment in
// group, if it has the shape tenure writes. It builds the record's
// partition lists directly, each with one allocation, without the runs
// the general decoder goes through, and reads a topic name that repeats
// the one before (a member's lists are runs of the same topics) without
// allocating it again.
func decodeAssignmentFast(group, member string, data []byte) (*coordinator.AssignmentRecord, bool) {
	r := &coordinator.AssignmentRecord{Group: group, MemberID: member}
	d := runScanner{valueScanner: valueScanner{data: data}}
	var buf [16]runEntry
	entries := buf[:0] // the runs of the list read last
	done, ok := d.open('{', '}')
	for i := 0; ok && !done; i++ {
		if i = d.key(assignmentFields[:], i); i < 0 {
			return nil, false
		}
		switch i {
		case 0:
			_, ok = d.version()
		case 1:
			r.MemberEpoch, ok = d.int32()
		case 2:
			r.PrevEpoch, ok = d.int32()
		case 3:
			if entries, ok = d.runs(entries, true); ok {
				r.Owned = make([]coordinator.OwnedPartition, len(entries))
				for j, e := range entries {
					r.Owned[j] = coordinator.OwnedPartition{Topic: e.topic, Partition: e.partition, Token: epoch.Token(e.k)}
				}
			}
		case 4:
			if entries, ok = d.runs(entries, true); ok {
				r.Provisional = make([]coordinator.ProvisionalPartition, len(entries))
				for j, e := range entries {
					r.Provisional[j] = coordinator.ProvisionalPartition{Topic: e.topic, Partition: e.partition, Floor: epoch.Token(e.k)}
				}
			}
		case 5, 6, 7:
			if entries, ok = d.runs(entries, false); ok {
				l := make([]coordinator.TopicPartition, len(entries))
				for j, e := range entries {
					l[j] = coordinator.TopicPartition{Topic: e.topic, Partition: e.partition}
				}
				switch i {
				case 5:
					r.Pending = l
				case 6:
					r.Revoking = l
				default:
					r.Target = l
				}
			}
		case 8:
			r.Raw, ok = d.bytes()
		}
		if ok {
			done, ok = d.next('}')
		}
	}
	if !ok || !d.end() {
		return nil, false
	}
	return r, true
}

// runScanner reads an assignment's runs.
type runScanner struct {
	valueScanner
	topic string // the last topic name read
}

type runEntry struct {
	topic     string
	partition int32
	k         int64
}

// runs reads an array of runs ({"t":…,"p":[…],"k":[…]}) into scratch's
// storage and returns the entries, as unruns would list them from the
// general decoder's runs. withK, a run's "k" must have one entry per
// partition (the general decoder refuses it otherwise); without, a "k" is
// read and ignored, as unruns ignores it.
func (d *runScanner) runs(scratch []runEntry, withK bool) ([]runEntry, bool) {
	entries := scratch[:0]
	done, ok := d.open('[', ']')
	for ok && !done {
		first := len(entries)
		topic, nk := "", -1 // nk: the run's "k" entries, -1 without a "k"
		objDone, objOK := d.open('{', '}')
		for i := 0; objOK && !objDone; i++ {
			if i = d.key(runFields[:], i); i < 0 {
				return nil, false
			}
			switch i {
			case 0:
				topic, objOK = d.topicName()
			case 1:
				listDone, listOK := d.open('[', ']')
				for listOK && !listDone {
					var p int32
					if p, listOK = d.int32(); listOK {
						entries = append(entries, runEntry{partition: p})
						listDone, listOK = d.next(']')
					}
				}
				objOK = listOK
			case 2:
				nk = 0
				listDone, listOK := d.open('[', ']')
				for listOK && !listDone {
					var k int64
					if k, listOK = d.int(math.MinInt64, math.MaxInt64); listOK {
						if withK && first+nk < len(entries) {
							entries[first+nk].k = k
						}
						nk++
						listDone, listOK = d.next(']')
					}
				}
				objOK = listOK
			}
			if objOK {
				objDone, objOK = d.next('}')
			}
		}
		if !objOK || withK && max(nk, 0) != len(entries)-first {
			return nil, false
		}
		for j := first; j < len(entries); j++ {
			entries[j].topic = topic
		}
		done, ok = d.next(']')
	}
	return entries, ok
}

// topicName reads a string, the same string as the last one read if the
// bytes are the same.
func (d *runScanner) topicName() (string, bool) {
	start := d.i
	if d.prefix(`"`) && d.prefix(d.topic) && d.prefix(`"`) {
		return d.topic, true
	}
	d.i = start
	s, ok := d.string()
	if ok {
		d.topic = s
	}
	return s, ok
}

// open reads the '{' or '[' that opens an object or an array; done is
// true if close follows at once (it is read too).
func (d *valueScanner) open(c, close byte) (done, ok bool) {
	if !d.byte(c) {
		return false, false
	}
	return d.byte(close), true
}

// next reads what follows a field or an element: close (done) or a comma.
func (d *valueScanner) next(close byte) (done, ok bool) {
	if d.byte(close) {
		return true, true
	}
	return false, d.byte(',')
}

// key reads the key of an object's next field, one of fields from
// fields[from] on (the fields come in their order, each at most once),
// and returns its index; -1 if none is next.
func (d *valueScanner) key(fields []string, from int) int {
	for i := from; i < len(fields); i++ {
		if d.prefix(fields[i]) {
			return i
		}
	}
	return -1
}

// version reads a value's "v", which the general decoder refuses above
// valueVersion or below 0.
func (d *valueScanner) version() (int, bool) {
	n, ok := d.int(0, valueVersion)
	return int(n), ok
}

func (d *valueScanner) int32() (int32, bool) {
	n, ok := d.int(math.MinInt32, math.MaxInt32)
	return int32(n), ok
}

func (d *valueScanner) bool() (bool, bool) {
	if d.prefix("true") {
		return true, true
	}
	return false, d.prefix("false")
}

// bytes reads a []byte field: a base64 string, as encoding/json does (an
// empty string is an empty slice, not nil).
func (d *valueScanner) bytes() ([]byte, bool) {
	s, ok := d.string()
	if !ok {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(s)
	return b, err == nil
}

// strings reads an array of strings.
func (d *valueScanner) strings() ([]string, bool) {
	return list(d, d.string)
}

func (d *valueScanner) protocols() ([]protocolValue, bool) {
	return list(d, func() (p protocolValue, ok bool) {
		ok = d.object(protocolFields[:], func(i int) (ok bool) {
			if i == 0 {
				p.Name, ok = d.string()
			} else {
				p.Metadata, ok = d.bytes()
			}
			return ok
		})
		return p, ok
	})
}

func (d *valueScanner) int64() (int64, bool) {
	return d.int(math.MinInt64, math.MaxInt64)
}

// list reads an array, item reading each element: the slice is not nil,
// even when empty, as encoding/json gives [].
func list[T any](d *valueScanner, item func() (T, bool)) ([]T, bool) {
	out := []T{}
	done, ok := d.open('[', ']')
	for ok && !done {
		var v T
		if v, ok = item(); ok {
			out = append(out, v)
			done, ok = d.next(']')
		}
	}
	return out, ok
}

// object reads an object whose keys are among fields (in their order, each
// at most once), field reading the value of fields[i].
func (d *valueScanner) object(fields []string, field func(i int) bool) bool {
	done, ok := d.open('{', '}')
	for i := 0; ok && !done; i++ {
		if i = d.key(fields, i); i < 0 {
			return false
		}
		if ok = field(i); ok {
			done, ok = d.next('}')
		}
	}
	return ok
}
