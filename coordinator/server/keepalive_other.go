//go:build !linux

package server

import (
	"net"
	"time"
)

// setUserTimeout does nothing where TCP_USER_TIMEOUT is not available:
// keepalive probes alone bound the silence of an idle connection.
func setUserTimeout(*net.TCPConn, time.Duration) error { return nil }
