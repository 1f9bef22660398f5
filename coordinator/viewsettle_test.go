package coordinator

import (
	"testing"
	"time"
)

func TestViewSettling(t *testing.T) {
	changed := time.Unix(1000, 0)
	for _, c := range []struct {
		name    string
		changed time.Time
		after   time.Duration
		settle  time.Duration
		want    bool
	}{
		{"never changed", time.Time{}, 0, DefaultViewSettle, false},
		{"at the change", changed, 0, DefaultViewSettle, true},
		{"inside the window", changed, 9999 * time.Millisecond, DefaultViewSettle, true},
		{"at the window's end", changed, DefaultViewSettle, DefaultViewSettle, false},
		{"after it", changed, time.Minute, DefaultViewSettle, false},
		{"window off", changed, 0, 0, false},
	} {
		base := c.changed
		if base.IsZero() {
			base = changed
		}
		if got := ViewSettling(c.changed, base.Add(c.after), c.settle); got != c.want {
			t.Errorf("%s: ViewSettling = %v, want %v", c.name, got, c.want)
		}
	}
}
