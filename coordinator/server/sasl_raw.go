package server

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// After a SaslHandshake v0 (17_sasl_handshake.go), the SASL exchange is
// not carried by SaslAuthenticate requests but comes as raw tokens: each
// frame of the connection, until it has authenticated, is a 4-byte length
// and a token of the mechanism (PLAIN's message, SCRAM's client-first or
// client-final message), with no request header, and each is answered
// with a frame of the server's token alone (empty for PLAIN, SCRAM's
// server-first and server-final messages). A failed exchange has no way
// to say so in this framing: as Kafka does, the server closes the
// connection without an answer, after AuthFailureDelay. Once
// authenticated, the frames are requests again.

// rawSASLResponse is the answer to a raw token: written as a frame of
// SASLAuthBytes alone (appendResponse), counted as the SaslAuthenticate
// response it embeds.
type rawSASLResponse struct{ kmsg.SASLAuthenticateResponse }

// handleRawSASL handles one raw token of a connection whose handshake was
// v0. Its error closes the connection.
func (c *conn) handleRawSASL(body []byte) error {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SASLAuthBytes = decodeRawSASL(body)
	resp := c.s.handleSaslAuthenticate(c, req).(*kmsg.SASLAuthenticateResponse)
	if err := c.afterAuthRequest(); err != nil {
		return err
	}
	if resp.ErrorCode != 0 {
		// Not a failed exchange (that sets auth.fail), but a state the
		// raw framing cannot be in; close rather than answer nothing.
		return fmt.Errorf("%w: raw SASL token answered with error code %d", errAuthClose, resp.ErrorCode)
	}
	sl := c.newSlot(header{Key: int16(kmsg.SASLAuthenticate)})
	sl.req = req
	c.enqueue(sl)
	c.respond(sl, &rawSASLResponse{*resp})
	return nil
}

// decodeRawSASL returns the token of a raw SASL frame's body, in memory
// of its own (the body may be the read buffer's). Every byte string is a
// token: what it means is for the mechanism to judge.
func decodeRawSASL(body []byte) []byte {
	return append([]byte(nil), body...)
}

// appendRawSASL appends the frame of a raw SASL answer to dst.
func appendRawSASL(dst []byte, token []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(token)))
	return append(dst, token...)
}
