package etcdstore

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

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
	dst = append(dst, ' ')
	if val == "" {
		dst = append(dst, '-')
	} else {
		dst = append(dst, val...)
	}
	return append(dst, '\n')
}

// batchLineLen is len(appendBatchLine(nil, topic, partition, val)).
func batchLineLen(topic string, partition int32, val string) int {
	n := escapedLen(topic) + 1 + decimalLen(partition) + 1 + len(val) + 1
	if val == "" {
		n++
	}
	return n
}

func decimalLen(n int32) int {
	l := 1
	if n < 0 {
		l++
	}
	for v := int64(n); v >= 10 || v <= -10; v /= 10 {
		l++
	}
	return l
}

// decodeBatch reads a batch value. The entries' values are slices of
// data, checked to decode as offset values without "fr".
func decodeBatch(data []byte) ([]batchEntry, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: empty", errBadBatch)
	}
	var out []batchEntry
	seen := map[tp]struct{}{}
	for len(data) > 0 {
		nl := bytes.IndexByte(data, '\n')
		if nl < 0 {
			return nil, fmt.Errorf("%w: a line without its end", errBadBatch)
		}
		line := data[:nl]
		data = data[nl+1:]
		name, val, ok := bytes.Cut(line, []byte{' '})
		if !ok {
			return nil, fmt.Errorf("%w: line %q has no value", errBadBatch, line)
		}
		et, part, ok := strings.Cut(string(name), "/")
		if !ok {
			return nil, fmt.Errorf("%w: %q is not topic/partition", errBadBatch, name)
		}
		topic, err := unescape(et)
		if err != nil {
			return nil, fmt.Errorf("%w: topic %q: %w", errBadBatch, et, err)
		}
		n, err := strconv.ParseInt(part, 10, 32)
		if err != nil || strconv.FormatInt(n, 10) != part {
			return nil, fmt.Errorf("%w: partition %q", errBadBatch, part)
		}
		e := batchEntry{tp: tp{topic, int32(n)}}
		if _, dup := seen[e.tp]; dup {
			return nil, fmt.Errorf("%w: %s/%d twice", errBadBatch, topic, n)
		}
		seen[e.tp] = struct{}{}
		if string(val) != "-" {
			_, fr, err := decodeOffset("", topic, e.partition, val)
			switch {
			case err != nil:
				return nil, fmt.Errorf("%w: %s/%d: %w", errBadBatch, topic, n, err)
			case fr != 0:
				return nil, fmt.Errorf("%w: %s/%d: a fold order in a batch", errBadBatch, topic, n)
			}
			e.val = val
		}
		out = append(out, e)
	}
	return out, nil
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

// orderedOffset is a partition's write with its order; rec nil: deleted.
type orderedOffset struct {
	order int64
	rec   *coordinator.OffsetRecord
}

// offsetMerge applies the read rule: each partition keeps the write of
// the highest order.
type offsetMerge map[tp]orderedOffset

func (m offsetMerge) put(k tp, order int64, rec *coordinator.OffsetRecord) {
	if cur, ok := m[k]; ok && cur.order > order {
		return
	}
	m[k] = orderedOffset{order, rec}
}

// addKey takes a partition key's value, written at revision modRev.
func (m offsetMerge) addKey(group string, k tp, modRev int64, val []byte) error {
	r, fr, err := decodeOffset(group, k.topic, k.partition, val)
	if err != nil {
		return err
	}
	if fr == 0 {
		fr = modRev
	}
	m.put(k, fr, r)
	return nil
}

// addBatch takes a batch's value, written at revision modRev.
func (m offsetMerge) addBatch(group string, modRev int64, val []byte) error {
	entries, err := decodeBatch(val)
	if err != nil {
		return err
	}
	for _, e := range entries {
		var r *coordinator.OffsetRecord
		if e.val != nil {
			if r, _, err = decodeOffset(group, e.topic, e.partition, e.val); err != nil {
				return err
			}
		}
		m.put(e.tp, modRev, r)
	}
	return nil
}

// records returns the partitions that hold an offset.
func (m offsetMerge) records(out []*coordinator.OffsetRecord) []*coordinator.OffsetRecord {
	for _, o := range m {
		if o.rec != nil {
			out = append(out, o.rec)
		}
	}
	return out
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
