package server

import (
	"net"

	"go.uber.org/zap"
)

// connsPerIP counts the open connections of each client IP address, for
// Config.MaxConnectionsPerIP (Kafka's max.connections.per.ip). It is
// guarded by Server.connMu, with the connection set it shadows.
type connsPerIP map[string]int

// remoteIP is the address a connection is counted under: its remote
// host, without the port.
func remoteIP(nc net.Conn) string {
	addr := nc.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// admitIP counts a new connection from ip, or refuses it, with a metric
// and a log line, if ip holds its limit already. s.connMu must be held.
func (s *Server) admitIP(ip, remote string) bool {
	limit := s.cfg.MaxConnectionsPerIP
	if limit <= 0 {
		return true
	}
	if s.perIP == nil {
		s.perIP = make(connsPerIP)
	}
	if n := s.perIP[ip]; n >= limit {
		s.m.limits.WithLabelValues("connections_per_ip").Inc()
		s.log.Warn("connection refused: per-IP connection limit reached",
			zap.String("remote", remote), zap.String("ip", ip), zap.Int("open", n), zap.Int("limit", limit))
		return false
	}
	s.perIP[ip]++
	return true
}

// releaseIP uncounts a closed connection from ip. s.connMu must be held.
func (s *Server) releaseIP(ip string) {
	if s.cfg.MaxConnectionsPerIP <= 0 {
		return
	}
	if s.perIP[ip]--; s.perIP[ip] <= 0 {
		delete(s.perIP, ip)
	}
}
