// Package wire decodes what a Kafka client sends: the request header and a
// request's body, from a frame's bytes. The server (package server, whose
// frame.go is the only caller) adds what it serves; this package holds
// only the decoding, so that its fuzz targets run in a binary of kmsg and
// little else, hundreds of times faster than in the server's test binary.
package wire

import (
	"encoding/binary"
	"errors"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Errors of malformed input. A malformed or hostile frame only ever
// affects its own connection, which the server closes.
var (
	ErrShortHeader = errors.New("wire: truncated request header")
	ErrMalformed   = errors.New("wire: malformed request body")
)

// Header is a decoded request header (request header v1/v2). ClientID
// aliases the frame and is nil for a null client ID.
type Header struct {
	Key     int16
	Version int16
	Corr    int32
	// ClientID is never compact, even in flexible headers (KIP-482
	// kept it a nullable string for ApiVersions' sake).
	ClientID    []byte
	HasClientID bool
}

// MinHeaderSize is key, version, correlation ID and the client ID's
// length.
const MinHeaderSize = 2 + 2 + 4 + 2

// ParseHeader decodes the fixed part of the request header at the start of
// body and returns the bytes after it: for flexible versions these still
// begin with the header's tagged fields, which DecodeBody skips. A
// negative client ID length is a null client ID, as in Kafka.
func ParseHeader(body []byte) (Header, []byte, error) {
	if len(body) < MinHeaderSize {
		return Header{}, nil, ErrShortHeader
	}
	h := Header{
		Key:     int16(binary.BigEndian.Uint16(body[0:])),
		Version: int16(binary.BigEndian.Uint16(body[2:])),
		Corr:    int32(binary.BigEndian.Uint32(body[4:])),
	}
	n := int16(binary.BigEndian.Uint16(body[8:]))
	rest := body[MinHeaderSize:]
	if n >= 0 {
		if int(n) > len(rest) {
			return Header{}, nil, ErrShortHeader
		}
		h.ClientID, h.HasClientID = rest[:n], true
		rest = rest[n:]
	}
	return h, rest, nil
}

// DecodeBody skips the header's tagged fields (flexible versions) and
// decodes the request body into req, whose version it sets. req's []byte
// fields alias rest.
func DecodeBody(req kmsg.Request, version int16, rest []byte) error {
	req.SetVersion(version)
	if req.IsFlexible() {
		r := kbin.Reader{Src: rest}
		kmsg.SkipTags(&r)
		if !r.Ok() {
			return ErrMalformed
		}
		rest = r.Src
	}
	if err := req.ReadFrom(rest); err != nil {
		return ErrMalformed
	}
	return nil
}

// AppendRequest appends one complete request frame to dst, as a client
// writes it: the size, the header (a nil clientID is null) and the body.
// Tests and fuzz seeds use it.
func AppendRequest(dst []byte, corr int32, clientID *string, req kmsg.Request) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.Key()))
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.GetVersion()))
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if clientID == nil {
		dst = binary.BigEndian.AppendUint16(dst, 0xffff)
	} else {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(*clientID)))
		dst = append(dst, *clientID...)
	}
	if req.IsFlexible() {
		dst = append(dst, 0)
	}
	dst = req.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
