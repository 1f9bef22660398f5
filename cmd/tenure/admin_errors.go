package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// probeTimeout bounds each step of probing a seed that a command could
// not get an answer from.
const probeTimeout = 2 * time.Second

// explain turns an error of an exchange with --brokers that says only
// that the client could not get through (kgo's "request ListGroups has 1
// separate shard errors, first: unable to dial: ...", or a bare "context
// deadline exceeded") into what a person can act on: nothing listens at
// the address, the address speaks HTTP or TLS, or it accepts connections
// but does not answer. Other errors are returned as they are.
func (a adminFlags) explain(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	seeds := splitList(*a.brokers)
	switch {
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		return fmt.Errorf("%w\nThe coordinator checks ACLs (serve --authorizer on), and whoever this connection is lacks "+
			"ALTER on the cluster (DESCRIBE to list): connect as one of serve's --super-users, over SASL (--sasl-user) "+
			"or through a loopback listener that serve's --listener-principal gives a super user's principal, "+
			"or have a super user allow it (tenure acls add --cluster --operation alter --principal User:NAME)", err)
	case errors.Is(err, kerr.SecurityDisabled):
		return fmt.Errorf("%w\nThe coordinator does not check ACLs: start it with --authorizer on (and --super-users)", err)
	case strings.Contains(msg, "'HTTP' in ascii"):
		return fmt.Errorf("--brokers %s speaks HTTP, not the Kafka protocol: give the coordinator's --listen address "+
			"(its --http address serves the admin API and metrics)", *a.brokers)
	case strings.Contains(msg, "tls alert record"):
		return fmt.Errorf("--brokers %s speaks TLS: add --tls (with --tls-ca if its certificate is not from a root the system trusts)", *a.brokers)
	case strings.Contains(msg, "does not look like a TLS handshake"):
		return fmt.Errorf("--brokers %s does not speak TLS: leave out the --tls flags, or give a TLS listener's address", *a.brokers)
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, context.DeadlineExceeded),
		strings.Contains(msg, "unable to dial"), strings.Contains(msg, "connection refused"):
	default:
		return err
	}
	var why []string
	for _, seed := range seeds {
		why = append(why, probeSeed(seed, *a.timeout))
	}
	what := "the cluster"
	if strings.Contains(msg, "SASL") || strings.Contains(msg, "sasl") {
		what = "the cluster (SASL)"
	}
	return fmt.Errorf("no answer from %s at --brokers %s: %s", what, *a.brokers, strings.Join(why, "; "))
}

// probeSeed says why a seed may not have answered a Kafka request: it
// dials it, and asks in HTTP, to which a Kafka listener says nothing.
func probeSeed(seed string, timeout time.Duration) string {
	c, err := net.DialTimeout("tcp", seed, probeTimeout)
	if err != nil {
		var oe *net.OpError
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			return fmt.Sprintf("nothing listens at %s (connection refused): is the coordinator running, and is this its --listen address?", seed)
		case errors.As(err, &oe) && oe.Timeout():
			return fmt.Sprintf("%s does not accept connections within %v (a firewall, or a host that is down?)", seed, probeTimeout)
		}
		return fmt.Sprintf("cannot connect to %s: %v", seed, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(probeTimeout))
	host, _, _ := net.SplitHostPort(seed)
	if _, err := io.WriteString(c, "GET / HTTP/1.0\r\nHost: "+host+"\r\n\r\n"); err != nil {
		return fmt.Sprintf("%s accepts connections but closes them: %v", seed, err)
	}
	head := make([]byte, 5)
	n, _ := io.ReadFull(c, head)
	switch {
	case string(head[:n]) == "HTTP/":
		return fmt.Sprintf("%s speaks HTTP, not the Kafka protocol: give the coordinator's --listen address "+
			"(its --http address serves the admin API and metrics)", seed)
	case n > 0 && head[0] == 0x15:
		return fmt.Sprintf("%s speaks TLS: add --tls", seed)
	}
	return fmt.Sprintf("%s accepts connections but did not answer within --timeout %v (an overloaded or paused coordinator, "+
		"or a server of another protocol?)", seed, timeout)
}
