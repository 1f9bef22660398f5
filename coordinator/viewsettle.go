package coordinator

import "time"

// The settle window after a change of an HA set's view.
//
// When the set's view clients see changes (a node left or came back, a
// departed node's broker ID points elsewhere), clients close connections
// of their own accord: kgo stops a broker whose address Metadata changed
// and dials the new one. A member whose heartbeat connection so closed
// may not be heard again within the connection-loss grace (a classic kgo
// member heartbeats every 3 s, and its next heartbeat may first meet a
// node that is not the coordinator). So for ViewSettle after a change, a
// close starts no grace (the caller does not step ConnectionClosed), and
// a member whose process really died in that window goes at its session
// timeout. The TCP server (coordinator/server, Config.ViewSettle, tenure
// serve --view-settle) and the simulator (timing view-settle=) both ask
// ViewSettling, so that they agree on the window.

// DefaultViewSettle is the default settle window: kgo reloads metadata at
// most every 5 s (MetadataMinAge), then needs a heartbeat interval and a
// coordinator lookup to reach the coordinator again.
const DefaultViewSettle = 10 * time.Second

// ViewSettling reports whether a connection that closed at now closed
// while the view that last changed at changed (zero: never) was settling,
// within settle of the change; such a close starts no connection-loss
// grace. A settle of 0 or less never settles.
func ViewSettling(changed, now time.Time, settle time.Duration) bool {
	return !changed.IsZero() && now.Sub(changed) < settle
}
