package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
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
		w, _ := probeSeed(context.Background(), seed, *a.timeout)
		why = append(why, w)
	}
	what := "the cluster"
	if strings.Contains(msg, "SASL") || strings.Contains(msg, "sasl") {
		what = "the cluster (SASL)"
	}
	return fmt.Errorf("no answer from %s at --brokers %s: %s", what, *a.brokers, strings.Join(why, "; "))
}

// probeSeed says why a seed may not have answered a Kafka request, and
// whether it speaks another protocol altogether (wrong). It sends a Kafka
// ApiVersions v0 request whose client ID ends in a blank line: a Kafka
// listener answers it as it answers any client, an HTTP server takes it for
// a malformed request and answers 400, and a TLS server sends an alert. So
// the probe tells the three apart without disturbing a coordinator.
func probeSeed(ctx context.Context, seed string, timeout time.Duration) (why string, wrong bool) {
	d := net.Dialer{Timeout: probeTimeout}
	c, err := d.DialContext(ctx, "tcp", seed)
	if err != nil {
		var oe *net.OpError
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			return fmt.Sprintf("nothing listens at %s (connection refused): is the coordinator running, and is this its --listen address?", seed), false
		case errors.As(err, &oe) && oe.Timeout():
			return fmt.Sprintf("%s does not accept connections within %v (a firewall, or a host that is down?)", seed, probeTimeout), false
		}
		return fmt.Sprintf("cannot connect to %s: %v", seed, err), false
	}
	defer c.Close()
	defer context.AfterFunc(ctx, func() { c.Close() })()
	c.SetDeadline(time.Now().Add(probeTimeout))
	if _, err := c.Write(probeRequest); err != nil {
		return fmt.Sprintf("%s accepts connections but closes them: %v", seed, err), false
	}
	head := make([]byte, 8)
	n, _ := io.ReadFull(c, head)
	switch {
	case n >= 5 && string(head[:5]) == "HTTP/":
		return fmt.Sprintf("%s speaks HTTP, not the Kafka protocol: give the coordinator's --listen address "+
			"(its --http address serves the admin API and metrics)", seed), true
	case n > 0 && head[0] == 0x15:
		return fmt.Sprintf("%s speaks TLS: add --tls", seed), true
	case n == 8 && binary.BigEndian.Uint32(head[4:]) == probeCorrelation:
		return fmt.Sprintf("%s answers Kafka requests, but not the command's within --timeout %v (an overloaded or paused "+
			"coordinator, or one holding requests through a fail-over?)", seed, timeout), false
	}
	return fmt.Sprintf("%s accepts connections but did not answer within --timeout %v (an overloaded or paused coordinator, "+
		"or a server of another protocol?)", seed, timeout), false
}

// probeCorrelation marks the probe's request, so that an answer to it is
// known for a Kafka one.
const probeCorrelation = 0x7465_6e75

// probeRequest is ApiVersions v0 (key 18, request header v1) from client
// "tenure-probe\r\n\r\n".
var probeRequest = func() []byte {
	const clientID = "tenure-probe\r\n\r\n"
	b := binary.BigEndian.AppendUint32(nil, uint32(2+2+4+2+len(clientID)))
	b = binary.BigEndian.AppendUint16(b, 18)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint32(b, probeCorrelation)
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	return append(b, clientID...)
}()

// wrongProtocolError ends a command whose seed speaks another protocol
// than Kafka's.
type wrongProtocolError struct{ why string }

func (e *wrongProtocolError) Error() string { return e.why }

// watchDelay is how long a command waits for the cluster before it probes
// its seeds: most commands have their answer sooner, and probe nothing.
const watchDelay = time.Second

// guard runs fn, the exchange of a command with --brokers, and explains its
// error. While fn waits, guard probes the seeds once (after watchDelay) and
// ends fn's context when one speaks HTTP or TLS: such a port never answers
// a Kafka request, and without the probe the command would wait out
// --timeout before saying so. With --tls a seed's TLS is expected, and a
// TLS client meets a plain port's answer at once, so nothing is probed.
func (a adminFlags) guard(ctx context.Context, fn func(context.Context) error) error {
	if a.security != nil && a.security.tls {
		return a.explain(fn(ctx))
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTimer(watchDelay)
		defer t.Stop()
		select {
		case <-wctx.Done():
			return
		case <-t.C:
		}
		for _, seed := range splitList(*a.brokers) {
			if why, wrong := probeSeed(wctx, seed, *a.timeout); wrong {
				cancel(&wrongProtocolError{why})
				return
			}
		}
	})
	err := fn(wctx)
	var wrong *wrongProtocolError
	cause := context.Cause(wctx)
	cancel(nil)
	wg.Wait()
	if err != nil && errors.As(cause, &wrong) {
		return fmt.Errorf("no answer from the cluster at --brokers %s: %s", *a.brokers, wrong.why)
	}
	return a.explain(err)
}
