package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions: v0-3.
//
// Lists the advertised table (versions.go). A version above 3 is answered
// at v0 with UNSUPPORTED_VERSION and key 18's range before the body is
// parsed (see conn.handleFrame), as Kafka does (KIP-511). v3 requests name
// the client software; a malformed name or version is INVALID_REQUEST, as
// in Kafka. No features are advertised.
func (s *Server) handleApiVersions(req *kmsg.ApiVersionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if req.Version >= 3 && (!validSoftwareName(req.ClientSoftwareName) || !validSoftwareName(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	resp.ApiKeys = apiVersionsKeys
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
