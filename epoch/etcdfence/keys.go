package etcdfence

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/epoch"
)

// ErrTokenKey is returned by [Fence.Put] when one of the caller's operations
// would write or delete a key under the fence's token prefix. Nothing is
// written.
var ErrTokenKey = errors.New("etcdfence: operation writes a token key")

// tokenLen is the size of an encoded token.
const tokenLen = 8

// encodeToken renders t so that etcd's byte-wise comparison of values orders
// tokens numerically: flipping the sign bit maps int64 order onto uint64
// order, and big-endian bytes compare like the uint64 they hold.
func encodeToken(t epoch.Token) string {
	var b [tokenLen]byte
	binary.BigEndian.PutUint64(b[:], uint64(t)^(1<<63))
	return string(b[:])
}

// decodeToken reverses encodeToken. key only labels the error.
func decodeToken(key string, v []byte) (epoch.Token, error) {
	if len(v) != tokenLen {
		return epoch.None, fmt.Errorf("etcdfence: token key %q holds %d bytes, want %d: not written by a fence", key, len(v), tokenLen)
	}
	return epoch.Token(binary.BigEndian.Uint64(v) ^ (1 << 63)), nil
}

// prefixEnd returns the smallest key greater than every key that starts with
// p, or nil if there is none (p is all 0xff bytes).
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// checkOps returns an error wrapping ErrTokenKey if any op, or any op nested
// in an OpTxn, writes a key in [lo, hi). Reads are allowed: a caller may want
// to see a token alongside its effect.
func checkOps(ops []clientv3.Op, lo, hi []byte) error {
	for _, op := range ops {
		if op.IsTxn() {
			_, thenOps, elseOps := op.Txn()
			if err := checkOps(thenOps, lo, hi); err != nil {
				return err
			}
			if err := checkOps(elseOps, lo, hi); err != nil {
				return err
			}
			continue
		}
		if !op.IsPut() && !op.IsDelete() {
			continue
		}
		if overlaps(op.KeyBytes(), op.RangeBytes(), lo, hi) {
			return fmt.Errorf("%w: key %q is under the token prefix %q", ErrTokenKey, op.KeyBytes(), lo)
		}
	}
	return nil
}

// overlaps reports whether the etcd range [key, end) meets [lo, hi). An empty
// end means the single key; an end of "\x00" means every key from key on, as
// in etcd's own requests. A nil hi means no upper bound.
func overlaps(key, end, lo, hi []byte) bool {
	var startsBeforeHi bool
	if hi == nil {
		startsBeforeHi = true
	} else {
		startsBeforeHi = bytes.Compare(key, hi) < 0
	}
	var endsAfterLo bool
	switch {
	case len(end) == 0:
		endsAfterLo = bytes.Compare(key, lo) >= 0
	case len(end) == 1 && end[0] == 0:
		endsAfterLo = true
	default:
		endsAfterLo = bytes.Compare(end, lo) > 0
	}
	return startsBeforeHi && endsAfterLo
}
