package etcdstore

import (
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/coordinator"
)

// A batch of records becomes a list of write transactions, applied in
// order. Within one, etcd rejects two operations on one key and a put into
// a range that is deleted ("duplicate key given in txn request",
// checkIntervals in etcd's v3rpc/key.go, whatever the order), so the
// planner folds operations as RecordSet would apply them:
//
//   - a write of a key already written in the transaction replaces that
//     write in place (the last record wins);
//   - a range deletion drops the transaction's writes of keys in the range
//     (it would delete them anyway), and a deletion of a key in a range
//     the transaction deletes is dropped (the key is gone already);
//   - a put into a range the transaction deletes starts the next
//     transaction, which runs after the deletion.
//
// A record's operations never straddle two transactions, so a batch cut
// short by an error has written a prefix of its records, as store.Store
// requires. A transaction ends before it would exceed MaxTxnOps operations
// or MaxTxnBytes bytes.

// opOverhead approximates an operation's framing in the request (tags,
// lengths, the RequestOp wrapper) beyond its key and value.
const opOverhead = 16

type writeOp struct {
	key   string
	end   string // a range deletion's end; "" for one key
	val   string
	put   bool
	dead  bool        // folded away
	batch *batchBuild // an offset batch's put: its value is built at the end
}

func (o *writeOp) size() int {
	n := len(o.key) + len(o.end) + len(o.val) + opOverhead
	if o.batch != nil {
		n += o.batch.bytes
	}
	return n
}

// batchBuild is the offset batch of one group in a transaction
// (offset_batch.go): its entries in order, the last write of a partition
// replacing an earlier one. The lines are written once, into lines, as
// the records come: the batch's value is lines itself unless a write was
// replaced, which leaves its line in place, unused.
type batchBuild struct {
	group   string
	lines   strings.Builder
	dead    int // bytes of replaced lines in lines
	entries []batchEntryBuild
	// The entry of each partition: a group's commits name one topic or a
	// few, so the first topic's partitions are found by number, the
	// others' by topic and number.
	topic  string
	parts  map[int32]int
	others map[tp]int
	bytes  int // of the value
	// foldBytes estimates what the fold writes for it: a batch must fit,
	// with its partition keys, in one fold transaction (fold.go).
	foldBytes int
	foldOp    int // keys.foldOpBytes(group)
	hint      int
}

// newBatchBuild makes group's batch, for about hint entries at most.
func newBatchBuild(k keys, group string, hint int) *batchBuild {
	return &batchBuild{group: group, foldOp: k.foldOpBytes(group), hint: hint}
}

// find returns the entry of p, or -1.
func (b *batchBuild) find(p tp) int {
	if len(b.entries) == 0 {
		return -1
	}
	i, ok := 0, false
	if p.topic == b.topic {
		i, ok = b.parts[p.partition]
	} else {
		i, ok = b.others[p]
	}
	if !ok {
		return -1
	}
	return i
}

// push appends the entry of p, which the batch has not, with its line.
func (b *batchBuild) push(p tp, line []byte) {
	switch {
	case len(b.entries) == 0:
		b.topic = p.topic
		b.parts = make(map[int32]int, b.hint)
		b.entries = make([]batchEntryBuild, 0, b.hint)
		// The lines of a group's commits are about as long as each
		// other.
		b.lines.Grow(b.hint * (len(line) + lineSlack))
		fallthrough
	case p.topic == b.topic:
		b.parts[p.partition] = len(b.entries)
	default:
		if b.others == nil {
			b.others = map[tp]int{}
		}
		b.others[p] = len(b.entries)
	}
	b.entries = append(b.entries, batchEntryBuild{p, b.lines.Len(), len(line)})
	b.lines.Write(line)
}

// replace makes line entry i's, in place of its line.
func (b *batchBuild) replace(i int, line []byte) {
	e := &b.entries[i]
	b.dead += e.size
	e.start, e.size = b.lines.Len(), len(line)
	b.lines.Write(line)
}

// lineSlack is what a batch's first allocation gives each line beyond
// the first line's length: the offsets' digits vary.
const lineSlack = 8

// batchEntryBuild is an entry of a batchBuild: its partition and its
// line in the batch's lines.
type batchEntryBuild struct {
	tp
	start, size int
}

// foldOpBytes is what a partition key's put costs in a fold beyond the
// entry's line: its directories, "fr" and the framing.
func (k keys) foldOpBytes(group string) int {
	return len(k.groups) + escapedLen(group) + 1 + len(offsetsDir) + 24 + opOverhead
}

// value is the batch's value: its entries' lines in order.
func (b *batchBuild) value() string {
	lines := b.lines.String()
	if b.dead == 0 {
		return lines
	}
	var out strings.Builder
	out.Grow(b.bytes)
	for _, e := range b.entries {
		out.WriteString(lines[e.start : e.start+e.size])
	}
	return out.String()
}

// plannedTxn is one transaction's operations.
type plannedTxn struct {
	ops     []writeOp
	index   map[string]int // the single-key operations by key
	ranges  []keyRange
	live    int // ops not folded away
	bytes   int
	records int
	batches map[string]*batchBuild // the live offset batch of each group
	last    *batchBuild            // the batch batch() found last
	deleted []string               // the groups it deletes
	cmps    []clientv3.Cmp         // compared besides the guard and the fence (a fold's)
}

// newPlannedTxn makes a transaction for about ops operations.
func newPlannedTxn(ops int) *plannedTxn {
	return &plannedTxn{ops: make([]writeOp, 0, ops), index: make(map[string]int, ops)}
}

// batch returns the transaction's batch of group, or nil.
func (t *plannedTxn) batch(group string) *batchBuild {
	if t.last != nil && t.last.group == group {
		return t.last // a group's records mostly come together
	}
	b := t.batches[group]
	if b != nil {
		t.last = b
	}
	return b
}

// addOffset adds r, whose batch line is line, to its group's batch,
// whose key batchKey makes if the transaction has none for the group
// yet, sized for the entries hint gives.
func (t *plannedTxn) addOffset(k keys, r *coordinator.OffsetRecord, line []byte, batchKey func(group string) string, hint func() int) {
	b := t.batch(r.Group)
	if b == nil {
		b = newBatchBuild(k, r.Group, hint())
		if t.batches == nil {
			t.batches = map[string]*batchBuild{}
		}
		t.batches[r.Group] = b
		t.last = b
		t.add(writeOp{key: batchKey(r.Group), put: true, batch: b})
	}
	p := tp{r.Topic, r.Partition}
	size := len(line)
	if i := b.find(p); i >= 0 {
		grow := size - b.entries[i].size
		b.replace(i, line)
		b.bytes += grow
		b.foldBytes += grow
		t.bytes += grow
		return
	}
	b.push(p, line)
	b.bytes += size
	b.foldBytes += size + b.foldOp
	t.bytes += size
}

// offsetFits reports whether r, with a batch line of size bytes, can
// join the transaction, and how many operations and bytes it adds: a
// batch holds at most maxOps-1 entries and maxBytes of fold writes, so
// that a fold writes it and its partition keys in one transaction.
func (t *plannedTxn) offsetFits(k keys, r *coordinator.OffsetRecord, size, maxOps, maxBytes int) (fits bool, grow, bytes int) {
	b := t.batch(r.Group)
	if b == nil {
		// A new batch key: a put, which must not fall in a range the
		// transaction deletes (a deletion of the group).
		dir := k.offsetBatchDir(r.Group)
		return !t.inDeletedRange(dir), 1, size + len(dir) + 24 + opOverhead
	}
	if b.find(tp{r.Topic, r.Partition}) >= 0 {
		return true, 0, size
	}
	fits = len(b.entries) < max(1, maxOps-1) && b.foldBytes+size+b.foldOp <= maxBytes
	return fits, 0, size
}

func (t *plannedTxn) inDeletedRange(key string) bool {
	for _, r := range t.ranges {
		if r.contains(key) {
			return true
		}
	}
	return false
}

func (t *plannedTxn) add(o writeOp) {
	switch {
	case o.end != "":
		r := keyRange{o.key, o.end}
		for _, have := range t.ranges {
			if have == r {
				return
			}
		}
		for i := range t.ops {
			op := &t.ops[i]
			if !op.dead && op.end == "" && r.contains(op.key) {
				t.kill(i)
			}
		}
		t.ranges = append(t.ranges, r)
	case !o.put && t.inDeletedRange(o.key):
		return
	default:
		if i, ok := t.index[o.key]; ok {
			t.bytes += o.size() - t.ops[i].size()
			t.ops[i] = o
			return
		}
		t.index[o.key] = len(t.ops)
	}
	t.ops = append(t.ops, o)
	t.live++
	t.bytes += o.size()
}

func (t *plannedTxn) kill(i int) {
	op := &t.ops[i]
	op.dead = true
	delete(t.index, op.key)
	if op.batch != nil && t.batches[op.batch.group] == op.batch {
		delete(t.batches, op.batch.group)
		if t.last == op.batch {
			t.last = nil
		}
	}
	t.live--
	t.bytes -= op.size()
}

// clientOps returns the transaction's operations for clientv3.
func (t *plannedTxn) clientOps() []clientv3.Op {
	out := make([]clientv3.Op, 0, t.live)
	for i := range t.ops {
		o := &t.ops[i]
		switch {
		case o.dead:
		case o.batch != nil:
			out = append(out, clientv3.OpPut(o.key, o.batch.value()))
		case o.put:
			out = append(out, clientv3.OpPut(o.key, o.val))
		case o.end != "":
			out = append(out, clientv3.OpDelete(o.key, clientv3.WithRange(o.end)))
		default:
			out = append(out, clientv3.OpDelete(o.key))
		}
	}
	return out
}

// trimEvery is how often (in epochs) a group's generation log is trimmed.
const trimEvery = 32

// appendRecordOps appends the operations that apply r, in RecordSet's
// terms, to ops.
func (k keys) appendRecordOps(ops []writeOp, r coordinator.Record) []writeOp {
	switch r := r.(type) {
	case *coordinator.GroupRecord:
		if !r.Deleted {
			return append(ops, putOp(k.group(r.Group), r))
		}
		rest := k.groupRest(r.Group)
		return append(ops,
			writeOp{key: rest[0].start, end: rest[0].end},
			writeOp{key: rest[1].start, end: rest[1].end},
			putOp(k.group(r.Group), r))
	case *coordinator.MemberRecord:
		if r.Deleted {
			return append(ops, writeOp{key: k.member(r.Group, r.MemberID)}, writeOp{key: k.assignment(r.Group, r.MemberID)})
		}
		return append(ops, putOp(k.member(r.Group, r.MemberID), r))
	case *coordinator.AssignmentRecord:
		return append(ops, putOp(k.assignment(r.Group, r.MemberID), r))
	case *coordinator.OffsetRecord:
		panic("etcdstore: an offset goes to its group's batch (plannedTxn.addOffset)")
	case *coordinator.TopicRecord:
		if r.Deleted {
			return append(ops, writeOp{key: k.topic(r.Name)})
		}
		return append(ops, putOp(k.topic(r.Name), r))
	case *coordinator.GenerationRecord:
		ops = append(ops, putOp(k.logEntry(r.Group, r.Epoch), r))
		// Retention: trim once every trimEvery entries (a range deletion
		// per write would cost etcd an index walk for nothing), so a log
		// holds at most retention + trimEvery entries.
		if r.Trim > 0 && r.Epoch%trimEvery == 0 {
			ops = append(ops, writeOp{key: k.logDir(r.Group), end: k.logEntry(r.Group, r.Trim+1)})
		}
		return ops
	}
	return ops // store.Check admitted only the types above
}

func putOp(key string, r coordinator.Record) writeOp {
	return writeOp{key: key, val: valueString(r), put: true}
}

// valueString is encodeValue(r) as a string, made with one allocation
// when a fast path takes r and its value fits the buffer: a join's
// assignments are most of what it writes (encoding_group.go).
func valueString(r coordinator.Record) string {
	var buf [256]byte
	var b []byte
	ok := false
	switch r := r.(type) {
	case *coordinator.AssignmentRecord:
		b, ok = appendAssignmentFast(buf[:0], r)
	case *coordinator.MemberRecord:
		b, ok = appendMemberFast(buf[:0], r)
	case *coordinator.GroupRecord:
		b, ok = appendGroupFast(buf[:0], r)
	case *coordinator.GenerationRecord:
		b, ok = appendGenerationFast(buf[:0], r)
	}
	if ok {
		return string(b)
	}
	return string(encodeValue(r))
}

// offsetRun counts the offset records of group that recs begins with, up
// to limit: a batch's size, as the records of one Ready come together.
func offsetRun(recs []coordinator.Record, group string, limit int) int {
	n := 0
	for _, r := range recs {
		if o, ok := r.(*coordinator.OffsetRecord); !ok || o.Group != group || n == limit {
			break
		}
		n++
	}
	return n
}

// plan turns recs into transactions of at most maxOps operations and,
// unless one record alone is larger, maxBytes bytes. Offset records go
// to their group's batch in the transaction, a new key from batchKey
// (offset_batch.go).
func (k keys) plan(recs []coordinator.Record, maxOps, maxBytes int, batchKey func(group string) string) []*plannedTxn {
	var out []*plannedTxn
	// A transaction's offsets are a key a group, however many: its
	// operations are about one a record of any other kind, and a few.
	general := 0
	for _, r := range recs {
		if _, ok := r.(*coordinator.OffsetRecord); !ok {
			general++
		}
	}
	hint := min(general+4, maxOps)
	cur := newPlannedTxn(hint)
	var ops []writeOp // reused: a record has a few operations at most
	// line is reused too: offset commits are most of what a node
	// writes, and each is a batch line written here and copied once
	// into its batch, without an allocation of its own.
	var line []byte
	for i, r := range recs {
		if o, ok := r.(*coordinator.OffsetRecord); ok {
			line = appendOffsetLine(line[:0], o)
			fits, grow, size := cur.offsetFits(k, o, len(line), maxOps, maxBytes)
			if cur.live > 0 && (!fits || cur.live+grow > maxOps || cur.bytes+size > maxBytes) {
				out = append(out, cur)
				cur = newPlannedTxn(hint)
			}
			cur.addOffset(k, o, line, batchKey, func() int { return offsetRun(recs[i:], o.Group, maxOps) })
			cur.records++
			continue
		}
		ops = k.appendRecordOps(ops[:0], r)
		size, grow, conflict := 0, 0, false
		for i := range ops {
			o := &ops[i]
			size += o.size()
			switch _, dup := cur.index[o.key]; {
			case o.put && cur.inDeletedRange(o.key):
				conflict = true
			case o.end == "" && (dup || cur.inDeletedRange(o.key)):
				// Folds into an operation the transaction has.
			default:
				grow++
			}
		}
		// grow and size are upper bounds: a range deletion may fold away
		// more.
		if cur.live > 0 && (conflict || cur.live+grow > maxOps || cur.bytes+size > maxBytes) {
			out = append(out, cur)
			cur = newPlannedTxn(hint)
		}
		for _, o := range ops {
			cur.add(o)
		}
		if g, ok := r.(*coordinator.GroupRecord); ok && g.Deleted {
			cur.deleted = append(cur.deleted, g.Group)
		}
		cur.records++
	}
	if cur.records > 0 {
		out = append(out, cur)
	}
	return out
}
