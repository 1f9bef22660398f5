package server

import (
	"net"
	"time"
)

// keepAliveProbe is both the idle time before the first TCP keepalive probe
// and the time between probes when Config.KeepAlive is set: the least the
// kernels take (their keepalive timers count whole seconds).
const keepAliveProbe = time.Second

// setKeepAlive makes the kernel give up on the connection once its peer has
// answered nothing for d: probes go out after a second of silence, once a
// second, and where the platform has it (Linux's TCP_USER_TIMEOUT) the same
// bound holds for data sent and not acknowledged. The peer's kernel answers
// the probes while its process is alive, even paused or swapping; a host
// that crashed, or one a network cut separates, does not, and the read that
// then fails ends the connection like a close: the group hears of it
// through coordinator.ConnectionClosed and expels the member a grace later
// (Core.ConnLossGrace), instead of at its session timeout.
func setKeepAlive(nc net.Conn, d time.Duration) error {
	tc, ok := nc.(*net.TCPConn)
	if !ok || d <= 0 {
		return nil
	}
	count := max(int((d+keepAliveProbe-1)/keepAliveProbe)-1, 1)
	if err := tc.SetKeepAliveConfig(net.KeepAliveConfig{
		Enable: true, Idle: keepAliveProbe, Interval: keepAliveProbe, Count: count,
	}); err != nil {
		return err
	}
	return setUserTimeout(tc, d)
}
