package server

import (
	"encoding/binary"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator/server/internal/wire"
)

// Errors that close a connection. A malformed or hostile frame only ever
// affects its own connection.
var (
	errNegativeSize      = errors.New("server: negative frame size")
	errFrameTooLarge     = errors.New("server: frame larger than the limit")
	errUnknownKey        = errors.New("server: unknown API key")
	errUnsupportedKey    = errors.New("server: API key not served")
	errUnsupportedVer    = errors.New("server: unsupported API version")
	errClosedMidFrame    = errors.New("server: connection closed mid-frame")
	errApiVersionsTooNew = errors.New("server: ApiVersions version above the served range")
)

// header is a decoded request header; ClientID aliases the frame.
type header = wire.Header

// parseHeader decodes the fixed part of the request header at the start of
// body and returns the bytes after it (wire.ParseHeader): for flexible
// versions these still begin with the header's tagged fields, which
// decodeBody skips.
func parseHeader(body []byte) (header, []byte, error) {
	return wire.ParseHeader(body)
}

// checkHeader decides whether the server serves h's key and version:
// errApiVersionsTooNew asks for the v0 UNSUPPORTED_VERSION answer, any
// other error closes the connection.
func checkHeader(h header) error {
	if h.Key < 0 || int(h.Key) > maxKey || !kmsgKeys[h.Key] {
		return errUnknownKey
	}
	if a := &apis[h.Key]; a.versionProbe && h.Version > a.max {
		return errApiVersionsTooNew
	}
	if apis[h.Key].handle == nil {
		return errUnsupportedKey
	}
	if !supported(h.Key, h.Version) {
		return errUnsupportedVer
	}
	return nil
}

// kmsgKeys[k] reports whether kmsg knows API key k, computed once so
// that checking a frame's key allocates nothing (RequestForKey returns a
// new request).
var kmsgKeys = func() (t [maxKey + 1]bool) {
	for k := range t {
		t[k] = kmsg.RequestForKey(int16(k)) != nil
	}
	return t
}()

// decodeBody skips the header's tagged fields (flexible versions) and
// decodes the request body into req, whose version it sets
// (wire.DecodeBody). req's []byte fields alias rest.
func decodeBody(req kmsg.Request, version int16, rest []byte) error {
	return wire.DecodeBody(req, version, rest)
}

// decodeFrame decodes a whole frame body (everything after the 4-byte
// size) into a fresh request. It is the pure form of what a connection
// does, used by the fuzz targets and tests.
func decodeFrame(body []byte) (header, kmsg.Request, error) {
	h, rest, err := parseHeader(body)
	if err != nil {
		return h, nil, err
	}
	if err := checkHeader(h); err != nil {
		return h, nil, err
	}
	req := kmsg.RequestForKey(h.Key)
	if err := decodeBody(req, h.Version, rest); err != nil {
		return h, nil, err
	}
	return h, req, nil
}

// appendFrameHeader starts a response frame: a size placeholder, the
// correlation ID and, for flexible responses other than ApiVersions' (whose
// response header is always v0: api.versionProbe), the empty tagged-field
// section.
func appendFrameHeader(dst []byte, corr int32, resp kmsg.Response) []byte {
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if resp.IsFlexible() && !apis[resp.Key()].versionProbe {
		dst = append(dst, 0)
	}
	return dst
}

// appendResponse appends one complete response frame to dst.
func appendResponse(dst []byte, corr int32, resp kmsg.Response) []byte {
	if raw, ok := resp.(*rawSASLResponse); ok {
		return appendRawSASL(dst, raw.SASLAuthBytes)
	}
	start := len(dst)
	dst = appendFrameHeader(dst, corr, resp)
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// appendRequest appends one complete request frame to dst, as a client
// writes it; tests and fuzz seeds use it.
func appendRequest(dst []byte, corr int32, clientID *string, req kmsg.Request) []byte {
	return wire.AppendRequest(dst, corr, clientID, req)
}
