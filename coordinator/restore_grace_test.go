package coordinator

import (
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
)

// TestRestoredDeadlineSpread: the spread of a restored member's deadline
// is the hash of the group, a NUL and the member ID, whichever way it is
// computed: the deadlines a takeover gives do not move with the code.
func TestRestoredDeadlineSpread(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TakeoverGrace = 30 * time.Second
	now := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	for _, m := range []struct{ group, member string }{{"g", "m"}, {"orders", "Zm9vYmFyYmF6cXV4MTIzNA"}, {"", ""}} {
		ms := uint64(cfg.TakeoverGrace / 8 / time.Millisecond)
		want := now.Add(cfg.TakeoverGrace + time.Duration(xxhash.Sum64String(m.group+"\x00"+m.member)%ms)*time.Millisecond)
		if got := cfg.restoredDeadline(now, m.group, m.member, 10*time.Second); !got.Equal(want) {
			t.Errorf("restoredDeadline(%q, %q) = %v, want %v", m.group, m.member, got, want)
		}
	}
}
