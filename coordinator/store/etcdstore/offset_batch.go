package etcdstore

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/tenure-dev/tenure/coordinator"
)

// Offset batches (format 5). etcd's cost is per key (a treeIndex lookup
// and insert, a KeyValue marshalled, a bbolt put, a watch event), and an
// offset commit is a small value, so a key per commit made the durable
// store spend about twice the memory store's CPU on each. Every offset
// write of a group in one transaction is therefore one key,
// <group dir>obatch/<store ID>-<seq>, whose value lists them, one line
// each:
//
//	<escaped topic>/<partition> <offset value>\n   a commit
//	<escaped topic>/<partition> -\n                a deletion
//
// The offset value is the one a partition key would hold, without "fr".
// A batch names each partition once (the planner keeps the last write of
// a transaction), holds at least one entry, and every line ends in '\n'.
//
// Read rule (Load, LoadGroup, the Mirror and the fold): each partition
// takes the write of the highest order. A batch entry's order is its
// key's ModRevision; a partition key's is its "fr" (the revision of the
// batch a fold took it from) or, without one, its ModRevision, so keys
// written before batches existed load as they are. A fold (fold.go)
// moves batches back into partition keys now and then.

// tp is a topic partition of one group.
type tp struct {
	topic     string
	partition int32
}

// batchEntry is one offset write of a batch.
type batchEntry struct {
	tp
	val []byte // the offset value; nil: a deletion
}

var errBadBatch = errors.New("not an offset batch")

// appendBatchLine appends the line of one entry (val "" for a deletion).
func appendBatchLine(dst []byte, topic string, partition int32, val string) []byte {
	dst = appendLinePrefix(dst, topic, partition)
	if val == "" {
		dst = append(dst, '-')
	} else {
		dst = append(dst, val...)
	}
	return append(dst, '\n')
}

// appendLinePrefix appends a line's "<escaped topic>/<partition> ".
func appendLinePrefix(dst []byte, topic string, partition int32) []byte {
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if unreserved(c) {
			dst = append(dst, c)
			continue
		}
		dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
	}
	dst = append(dst, '/')
	dst = strconv.AppendInt(dst, int64(partition), 10)
	return append(dst, ' ')
}

// appendOffsetLine appends the batch line of r: its value as encodeValue
// writes it, or a deletion.
func appendOffsetLine(dst []byte, r *coordinator.OffsetRecord) []byte {
	dst = appendLinePrefix(dst, r.Topic, r.Partition)
	if r.Deleted {
		return append(dst, '-', '\n')
	}
	if out, ok := appendOffsetFast(dst, r); ok {
		return append(out, '\n')
	}
	return append(append(dst, encodeValue(r)...), '\n')
}

// decodeBatch reads a batch value. The entries' values are slices of
// data, checked to decode as offset values without "fr".
func decodeBatch(data []byte) ([]batchEntry, error) {
	var out []batchEntry
	err := readBatch("", data, func(p tp, val []byte, _ *coordinator.OffsetRecord) {
		out = append(out, batchEntry{p, val})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readBatch reads a batch value, checked as decodeBatch says, and calls
// fn with each entry's value and its record of group (nil: a deletion),
// in order. It calls fn only once the whole value is checked.
func readBatch(group string, data []byte, fn func(p tp, val []byte, r *coordinator.OffsetRecord)) error {
	type entry struct {
		p   tp
		val []byte
		r   *coordinator.OffsetRecord
	}
	var entries []entry
	seen := map[tp]struct{}{}
	var sc batchScanner
	err := sc.scan(data, func(p tp, val []byte) error {
		if _, dup := seen[p]; dup {
			return fmt.Errorf("%w: %s/%d twice", errBadBatch, p.topic, p.partition)
		}
		seen[p] = struct{}{}
		e := entry{p: p, val: val}
		if val != nil {
			r, fr, err := decodeOffset(group, p.topic, p.partition, val)
			if err := entryErr(p, fr, err); err != nil {
				return err
			}
			e.r = r
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return err
	}
	for _, e := range entries {
		fn(e.p, e.val, e.r)
	}
	return nil
}

// entryErr is the error of a batch entry of p whose value read with
// fold order fr and error err, nil if none: a batch holds no fold order.
func entryErr(p tp, fr int64, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s/%d: %w", errBadBatch, p.topic, p.partition, err)
	case fr != 0:
		return fmt.Errorf("%w: %s/%d: a fold order in a batch", errBadBatch, p.topic, p.partition)
	}
	return nil
}

// batchScanner reads the lines of batch values without decoding their
// offset values: a fold reads every entry of its batches but needs the
// values of the winners only, one a partition. It keeps the topics it
// unescaped, so that a group's batches, naming the same few topics on
// every line, cost no allocation a line.
type batchScanner struct {
	topics map[string]string // unescaped, by escaped
}

// scan calls fn with each line's partition and value (nil: a deletion),
// in order, and stops at fn's first error. It checks the lines' form:
// each ends in '\n', names its topic escaped and its partition in
// canonical decimal, and has a value ("-" or anything else); a value is
// left to the caller to check, and so is a partition named twice.
func (sc *batchScanner) scan(data []byte, fn func(p tp, val []byte) error) error {
	if len(data) == 0 {
		return fmt.Errorf("%w: empty", errBadBatch)
	}
	for len(data) > 0 {
		nl := bytes.IndexByte(data, '\n')
		if nl < 0 {
			return fmt.Errorf("%w: a line without its end", errBadBatch)
		}
		line := data[:nl]
		data = data[nl+1:]
		sp := bytes.IndexByte(line, ' ')
		if sp < 0 {
			return fmt.Errorf("%w: line %q has no value", errBadBatch, line)
		}
		name, val := line[:sp], line[sp+1:]
		slash := bytes.IndexByte(name, '/')
		if slash < 0 {
			return fmt.Errorf("%w: %q is not topic/partition", errBadBatch, name)
		}
		topic, err := sc.topic(name[:slash])
		if err != nil {
			return err
		}
		n, ok := parseCanonicalInt32(name[slash+1:])
		if !ok {
			return fmt.Errorf("%w: partition %q", errBadBatch, name[slash+1:])
		}
		if len(val) == 1 && val[0] == '-' {
			val = nil
		}
		if err := fn(tp{topic, n}, val); err != nil {
			return err
		}
	}
	return nil
}

func (sc *batchScanner) topic(escaped []byte) (string, error) {
	if t, ok := sc.topics[string(escaped)]; ok {
		return t, nil
	}
	t, err := unescape(string(escaped))
	if err != nil {
		return "", fmt.Errorf("%w: topic %q: %w", errBadBatch, escaped, err)
	}
	if sc.topics == nil {
		sc.topics = map[string]string{}
	}
	sc.topics[string(escaped)] = t
	return t, nil
}

// parseCanonicalInt32 reads b as strconv.FormatInt writes an int32: an
// optional '-', then digits without a leading zero (but "0").
func parseCanonicalInt32(b []byte) (int32, bool) {
	neg := len(b) > 0 && b[0] == '-'
	digits := b
	if neg {
		digits = b[1:]
	}
	if len(digits) == 0 || len(digits) > 10 || digits[0] == '0' && (len(digits) > 1 || neg) {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	if n < math.MinInt32 || n > math.MaxInt32 {
		return 0, false
	}
	return int32(n), true
}

// encodeBatch is the value of entries (tests, and the fuzz target's
// round trip).
func encodeBatch(entries []batchEntry) []byte {
	var out []byte
	for _, e := range entries {
		out = appendBatchLine(out, e.topic, e.partition, string(e.val))
	}
	return out
}

// offsetMerge applies the read rule: each partition keeps the write of
// the highest order. It decodes the winners only: between two folds a
// committing group's batches name each partition many times over (its 64
// partitions in up to 256 batches), and decoding every entry cost most
// of a takeover's time on a fleet that commits. Every value is checked as
// it is read all the same (checkOffset), so a value that does not decode
// fails the read wherever it is, as it did when each was decoded.
type offsetMerge struct {
	m       map[tp]mergedOffset
	sc      batchScanner // the batches name the same few topics
	batches int          // batches read: the stamp that finds a partition a batch names twice
}

// mergedOffset is a partition's write with its order: its value, not
// decoded yet, or its record, if checking it decoded it; both nil:
// deleted.
type mergedOffset struct {
	order int64
	val   []byte
	rec   *coordinator.OffsetRecord
	batch int // the last batch (offsetMerge.batches) that named the partition
}

func newOffsetMerge(n int) *offsetMerge { return &offsetMerge{m: make(map[tp]mergedOffset, n)} }

// reset empties m for another group's read. The scanner keeps the
// topics it unescaped (a set's groups name the same topics), unless they
// grew many.
func (m *offsetMerge) reset() {
	clear(m.m)
	m.batches = 0
	if len(m.sc.topics) > 64 {
		m.sc.topics = nil
	}
}

// put takes k's write of order, unless a write of a higher order holds.
func (m *offsetMerge) put(k tp, w mergedOffset) {
	if cur, ok := m.m[k]; ok && cur.order > w.order {
		cur.batch = w.batch
		m.m[k] = cur
		return
	}
	m.m[k] = w
}

// addKey takes a partition key's value, written at revision modRev.
func (m *offsetMerge) addKey(group string, k tp, modRev int64, val []byte) error {
	r, fr, err := checkOffset(group, k.topic, k.partition, val)
	if err != nil {
		return err
	}
	if fr == 0 {
		fr = modRev
	}
	m.put(k, mergedOffset{order: fr, val: val, rec: r})
	return nil
}

// addBatch takes a batch's value, written at revision modRev, checked as
// readBatch checks it.
func (m *offsetMerge) addBatch(group string, modRev int64, val []byte) error {
	m.batches++
	return m.sc.scan(val, func(p tp, v []byte) error {
		if cur, ok := m.m[p]; ok && cur.batch == m.batches {
			return fmt.Errorf("%w: %s/%d twice", errBadBatch, p.topic, p.partition)
		}
		w := mergedOffset{order: modRev, val: v, batch: m.batches}
		if v != nil {
			r, fr, err := checkOffset(group, p.topic, p.partition, v)
			if err := entryErr(p, fr, err); err != nil {
				return err
			}
			w.rec = r
		}
		m.put(p, w)
		return nil
	})
}

// records appends the records of group's partitions that hold an offset.
func (m *offsetMerge) records(group string, out []*coordinator.OffsetRecord) ([]*coordinator.OffsetRecord, error) {
	for p, o := range m.m {
		r := o.rec
		if r == nil && o.val != nil {
			var err error
			if r, _, err = decodeOffset(group, p.topic, p.partition, o.val); err != nil {
				// It was checked as it was read.
				return out, fmt.Errorf("etcdstore: group %q: %s/%d: %w", group, p.topic, p.partition, err)
			}
		}
		if r != nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// foldedValue is r's value with fold order fr: r encoded as Persist
// encodes it, then "fr", the last field, so the fast decoder reads it.
func foldedValue(r *coordinator.OffsetRecord, fr int64) string {
	var buf [160]byte
	val, ok := appendOffsetFast(buf[:0], r)
	if !ok {
		val = encodeValue(r)
	}
	b := make([]byte, 0, len(val)+24)
	b = append(b, val[:len(val)-1]...) // encoding/json's object: {...}
	if len(val) > 2 {
		b = append(b, ',')
	}
	b = append(b, `"fr":`...)
	b = strconv.AppendInt(b, fr, 10)
	return string(append(b, '}'))
}
