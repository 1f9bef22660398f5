package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions: v0-3.
//
// Lists every registered API with its version range (apis.go). A version
// above 3 is answered at v0 with UNSUPPORTED_VERSION and key 18's range
// before the body is parsed (see conn.handleFrame), as Kafka does
// (KIP-511). v3 requests name the client software; a malformed name or
// version is INVALID_REQUEST, as in Kafka. No features are advertised.

func init() {
	register(api{
		key: 18, min: 0, max: 3,
		preAuth: true, versionProbe: true,
		aliasFree: true,
		handle: func(s *Server, c *conn, sl *slot, _ time.Time) {
			c.respond(sl, s.handleApiVersions(sl.req.(*kmsg.ApiVersionsRequest)))
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
			resp.ErrorCode = code
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 { return resp.(*kmsg.ApiVersionsResponse).ErrorCode },
	})
}

func (s *Server) handleApiVersions(req *kmsg.ApiVersionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if req.Version >= 3 && (!validSoftwareName(req.ClientSoftwareName) || !validSoftwareName(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	resp.ApiKeys = apiVersionsKeys()
	return resp
}

// validSoftwareName applies Kafka's pattern for client software names and
// versions: [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
func validSoftwareName(s string) bool {
	alnum := func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	if s == "" || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// apiVersionsTooNew is the v0 answer to an ApiVersions of a version above
// ours: UNSUPPORTED_VERSION and our ApiVersions range only.
func apiVersionsTooNew() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	k := kmsg.NewApiVersionsResponseApiKey()
	a := &apis[18]
	k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
	resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{k}
	return resp
}
