package server

import (
	"encoding/binary"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// saslHandshakeV0 sends a SaslHandshake v0 for mechanism and returns its
// code, as librdkafka 2.0 and kafka-python 2.0 do.
func (c *rawClient) saslHandshakeV0(mechanism string) *kmsg.SASLHandshakeResponse {
	c.t.Helper()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = 0, mechanism
	return c.roundTrip(req).(*kmsg.SASLHandshakeResponse)
}

// rawToken writes a raw SASL token as a frame of its own and reads the
// server's raw answer; err is the read's (the server closes the
// connection on a failed exchange).
func (c *rawClient) rawToken(token []byte) ([]byte, error) {
	c.t.Helper()
	c.write(appendRawSASL(nil, token))
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c.br, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.br, body); err != nil {
		return nil, err
	}
	return body, nil
}

// TestRawSASL: after a SaslHandshake v0, the exchange comes as raw tokens
// (librdkafka 2.0, kafka-python 2.0): PLAIN and both SCRAMs authenticate,
// after which the connection serves requests as the user; a wrong
// password closes the connection without an answer, as Kafka does. Before,
// v0 was not served and the connection closed at the handshake.
func TestRawSASL(t *testing.T) {
	ts, _, logs := saslServer(t, func(c *Config) { c.AuthFailureDelay = 0 })
	addUser(t, ts.creds.cs, "alice", "pw-256", ScramSHA256)
	addUser(t, ts.creds.cs, "alice", "pw-512", ScramSHA512)

	t.Run("PLAIN", func(t *testing.T) {
		c := dial(t, ts.addrs["SASL"])
		if r := c.saslHandshakeV0(Plain); r.ErrorCode != 0 || !slices.Contains(r.SupportedMechanisms, Plain) {
			t.Fatalf("handshake v0: %s %q", errName(r.ErrorCode), r.SupportedMechanisms)
		}
		reply, err := c.rawToken([]byte("\x00alice\x00pw-512"))
		if err != nil || len(reply) != 0 {
			t.Fatalf("PLAIN token: %q %v, want an empty answer", reply, err)
		}
		checkServes(t, c)
	})
	for _, tc := range []struct {
		mech, pass string
	}{{ScramSHA256, "pw-256"}, {ScramSHA512, "pw-512"}} {
		t.Run(tc.mech, func(t *testing.T) {
			c := dial(t, ts.addrs["SASL"])
			if r := c.saslHandshakeV0(tc.mech); r.ErrorCode != 0 {
				t.Fatalf("handshake v0: %s", errName(r.ErrorCode))
			}
			conv := scramClient(t, tc.mech, "alice", tc.pass)
			first, err := conv.Step("")
			if err != nil {
				t.Fatal(err)
			}
			serverFirst, err := c.rawToken([]byte(first))
			if err != nil {
				t.Fatalf("client-first: %v", err)
			}
			final, err := conv.Step(string(serverFirst))
			if err != nil {
				t.Fatalf("server-first %q: %v", serverFirst, err)
			}
			serverFinal, err := c.rawToken([]byte(final))
			if err != nil {
				t.Fatalf("client-final: %v", err)
			}
			if _, err := conv.Step(string(serverFinal)); err != nil || !conv.Valid() {
				t.Fatalf("server-final %q: %v", serverFinal, err)
			}
			checkServes(t, c)
		})
	}
	t.Run("wrong password", func(t *testing.T) {
		c := dial(t, ts.addrs["SASL"])
		if r := c.saslHandshakeV0(ScramSHA256); r.ErrorCode != 0 {
			t.Fatalf("handshake v0: %s", errName(r.ErrorCode))
		}
		conv := scramClient(t, ScramSHA256, "alice", "wrong")
		first, _ := conv.Step("")
		serverFirst, err := c.rawToken([]byte(first))
		if err != nil {
			t.Fatalf("client-first: %v", err)
		}
		final, _ := conv.Step(string(serverFirst))
		if reply, err := c.rawToken([]byte(final)); err == nil {
			t.Fatalf("a wrong password was answered %q", reply)
		}
		c.expectClosed(5 * time.Second)

		p := dial(t, ts.addrs["SASL"])
		p.saslHandshakeV0(Plain)
		if reply, err := p.rawToken([]byte("\x00alice\x00wrong")); err == nil {
			t.Fatalf("a wrong PLAIN password was answered %q", reply)
		}
	})
	if got := principals(logs, "SASL"); len(got) != 3 || slices.ContainsFunc(got, func(p string) bool { return p != "User:alice" }) {
		t.Errorf("principals on SASL: %q, want User:alice three times", got)
	}
}

// scramClient starts a SCRAM conversation of mechanism.
func scramClient(t *testing.T, mech, user, pass string) interface {
	Step(string) (string, error)
	Valid() bool
} {
	t.Helper()
	cl, err := mechanisms[mech].hash.NewClient(user, pass, "")
	if err != nil {
		t.Fatal(err)
	}
	return cl.NewConversation()
}

// FuzzRawSASL sends arbitrary raw tokens after a SaslHandshake v0 of each
// mechanism: the server must not panic, and answers or closes that
// connection only; a connection opened before keeps being served.
func FuzzRawSASL(f *testing.F) {
	f.Add(uint8(0), []byte("\x00alice\x00pw"))
	f.Add(uint8(1), []byte("n,,n=alice,r=abcdefgh"))
	f.Add(uint8(2), []byte("n,,n=alice,r=abcdefgh"))
	f.Add(uint8(1), []byte("c=biws,r=abc,p=AAAA"))
	f.Add(uint8(0), []byte{})
	f.Add(uint8(2), []byte("n,a=bob,n=alice,r=x"))
	ts, _, _ := saslServer(f, func(c *Config) { c.AuthFailureDelay = 0; c.AuthTimeout = 2 * time.Second })
	addUser(f, ts.creds.cs, "alice", "pw", ScramSHA256)
	control := dial(f, ts.addrs["INTERNAL"])
	mechs := []string{Plain, ScramSHA256, ScramSHA512}
	f.Fuzz(func(t *testing.T, m uint8, token []byte) {
		if len(token) > 64<<10 {
			return
		}
		control.t = t
		c := dial(t, ts.addrs["SASL"])
		if r := c.saslHandshakeV0(mechs[int(m)%len(mechs)]); r.ErrorCode != 0 {
			t.Fatalf("handshake v0: %s", errName(r.ErrorCode))
		}
		c.write(appendRawSASL(nil, token))
		// Then a second token, as SCRAM's client-final would come.
		c.write(appendRawSASL(nil, token))
		// The server answers or closes; a PLAIN success leaves the
		// connection open, serving requests, until the read times out.
		c.nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, _ = io.Copy(io.Discard, c.br)
		checkServes(t, control)
	})
}
