package etcdstore

import (
	"github.com/tenure-dev/tenure/coordinator"
)

// Every epoch bump writes its generation log entry, and again when its
// hand-off ends: two of the seven records a member's join cost in
// BenchmarkJoin, and the largest (the moves name members and tokens).
// Through encoding/json they took about 4% of a node's CPU over the join,
// with the garbage of the value built for it; the function here writes
// the same bytes directly, as encoding_group.go does for the group's other
// values, for an entry whose strings are plain (plainASCII). Nothing on a
// hot path reads the log (the mirror skips its keys), so it has no fast
// decoder.

// generationFields and moveFields are the keys of generationValue and
// moveValue in the order encoding/json writes them, with their colons.
var (
	generationFields = [...]string{`"v":`, `"t":`, `"at":`, `"r":`, `"n":`, `"j":`, `"l":`, `"m":`, `"mm":`, `"a":`,
		`"hd":`, `"hc":`, `"hg":`, `"hs":`, `"hu":`, `"hm":`, `"af":`, `"tr":`}
	moveFields = [...]string{`"t":`, `"p":`, `"f":`, `"fk":`, `"to":`, `"tk":`}
)

// appendGenerationFast appends r's value as marshalGeneration writes it,
// if its strings are plain.
func appendGenerationFast(dst []byte, r *coordinator.GenerationRecord) ([]byte, bool) {
	if !plainASCII(r.Reason) || !allPlain(r.Joined) || !allPlain(r.Left) {
		return dst, false
	}
	for i := range r.Moves {
		if m := &r.Moves[i]; !plainASCII(m.Topic) || !plainASCII(m.From) || !plainASCII(m.To) {
			return dst, false
		}
	}
	f := &generationFields
	w := newObjectWriter(dst)
	w.int(f[0], 2)
	w.int(f[1], int64(uint8(r.Type)))
	w.int(f[2], unixNano(r.Time))
	w.str(f[3], r.Reason)
	w.int(f[4], int64(r.Members))
	w.strs(f[5], r.Joined)
	w.strs(f[6], r.Left)
	if r.Moves != nil {
		w.key(f[7])
		w.b = append(w.b, '[')
		for i := range r.Moves {
			m := &r.Moves[i]
			if i > 0 {
				w.b = append(w.b, ',')
			}
			mw := newObjectWriter(w.b)
			mw.key(moveFields[0]) // not omitted when empty
			mw.b = appendPlainString(mw.b, m.Topic)
			mw.int(moveFields[1], int64(m.Partition))
			mw.str(moveFields[2], m.From)
			mw.int(moveFields[3], int64(m.OldToken))
			mw.str(moveFields[4], m.To)
			mw.int(moveFields[5], int64(m.NewToken))
			w.b = mw.end()
		}
		w.b = append(w.b, ']')
	}
	w.int(f[8], int64(r.MinMoves))
	w.bool(f[9], r.Assigned)
	h := &r.Handoff
	w.bool(f[10], h.Done)
	w.int(f[11], unixNano(h.Completed))
	w.int(f[12], int64(h.Granted))
	w.int(f[13], int64(h.Superseded))
	w.int(f[14], int64(h.Unowned))
	w.int(f[15], int64(h.MaxUnowned))
	w.int(f[16], unixNano(r.AfterFailover))
	w.int(f[17], int64(r.Trim))
	return w.end(), true
}

// allPlain reports whether every string of ss is plain (plainASCII).
func allPlain(ss []string) bool {
	for _, s := range ss {
		if !plainASCII(s) {
			return false
		}
	}
	return true
}

// strs writes a []string field as encoding/json does: left out when nil,
// [] when empty.
func (w *objectWriter) strs(k string, ss []string) {
	if ss == nil {
		return
	}
	w.key(k)
	w.b = append(w.b, '[')
	for i, s := range ss {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = appendPlainString(w.b, s)
	}
	w.b = append(w.b, ']')
}
