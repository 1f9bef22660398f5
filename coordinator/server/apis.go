package server

import (
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// api is everything the server knows of one API key. Each key registers
// its api once, from the init function of its own file (01_fetch.go,
// 12_heartbeat.go...), as kfake does, so that serving a new API touches
// one file; every per-key decision of the server (which versions, which
// keys before authentication, how a request is decoded, answered, refused
// or logged) reads the table built from the registrations. Only the memory
// of the reused heartbeat objects stays on the slot (slot.go), typed so
// that reusing it costs no allocation; the hooks that use it are here.
//
// The ranges cover what a stock kgo v1.22 consumer group and kadm send
// (the interop and kgo tests run them). A request for any other key or
// version closes its connection, as Kafka does, except ApiVersions itself,
// which is answered at v0 with UNSUPPORTED_VERSION so the client can step
// down (KIP-511).
type api struct {
	key, min, max int16

	// aliasFree says the decoded request holds no []byte field (unknown
	// tagged fields aside, which the server never reads), so it may be
	// decoded straight from the connection's read buffer, which the next
	// frame overwrites. Any other request is decoded from its own copy of
	// the frame, because the group core keeps, for example, a JoinGroup's
	// protocol metadata.
	aliasFree bool

	// parks says a request of this key may wait in its group for others
	// (JoinGroup, SyncGroup): the parked bounds apply to it (slot.go).
	parks bool

	// preAuth says a connection may send this key before it has
	// authenticated (ApiVersions, SaslHandshake, SaslAuthenticate:
	// authn.go).
	preAuth bool

	// versionProbe marks ApiVersions (KIP-511): a version above max is
	// answered at v0 with UNSUPPORTED_VERSION instead of closing the
	// connection, and the response header is v0 even for a flexible
	// version, so that a client of any version can read it (frame.go).
	versionProbe bool

	// member returns the member ID a request of this key names ("" for
	// none yet), for the connection that carries a member's latest
	// request (connloss.go) and for logs; nil for keys that name no
	// member.
	member func(req kmsg.Request) string

	// handle answers sl.req, a decoded request of this key, at once or
	// later: a group request may park in its group, a Fetch is held.
	handle func(s *Server, c *conn, sl *slot, now time.Time)

	// errorResponse answers req with code in every place the response
	// kind carries an error, without consulting any group. The server
	// uses it for requests it refuses before a group sees them (an
	// invalid or unknown group, the group limit), for replies it must not
	// send because the store failed, and for group requests still parked
	// at shutdown.
	errorResponse func(req kmsg.Request, code int16) kmsg.Response

	// responseCode returns the error a response reports, for metrics:
	// its top-level code, or the first non-zero nested one for responses
	// that only carry errors per group, topic or partition.
	responseCode func(resp kmsg.Response) int16

	// request and response, when set, return the slot's own request and
	// response objects instead of fresh ones, so that a steady-state
	// heartbeat allocates only the strings it decodes. request resets its
	// object to the zero value first: the core may keep slices of an
	// earlier request, which must not be written into. response does not:
	// the core resets a response it is given (coordinator.Request.Resp).
	request  func(sl *slot) kmsg.Request
	response func(sl *slot) kmsg.Response
}

// maxKey bounds the key-indexed tables: kmsg decodes no higher key.
const maxKey = kmsg.MaxKey

// apis is the registrations indexed by key; an entry without a handler is
// an API the server does not serve. It is written only by register, during
// package initialization.
var apis [maxKey + 1]api

// register adds a to the table. It panics, so at package initialization,
// on a registration the server could not honour: a key registered twice,
// a hook missing, or a version kmsg cannot decode.
func register(a api) {
	if a.key < 0 || int(a.key) > maxKey {
		panic(fmt.Sprintf("server: API key %d is not one kmsg decodes", a.key))
	}
	name := kmsg.NameForKey(a.key)
	switch req := kmsg.RequestForKey(a.key); {
	case apis[a.key].handle != nil:
		panic(fmt.Sprintf("server: %s registered twice", name))
	case a.handle == nil || a.errorResponse == nil || a.responseCode == nil:
		panic(fmt.Sprintf("server: %s registered without a handler, error response or response code", name))
	case req == nil || a.min < 0 || a.max < a.min || a.max > req.MaxVersion():
		panic(fmt.Sprintf("server: %s v%d-%d is not a range kmsg decodes", name, a.min, a.max))
	}
	apis[a.key] = a
}

// served yields every registered API in key order, the order ApiVersions
// lists them in.
func served(yield func(*api) bool) {
	for i := range apis {
		if apis[i].handle != nil && !yield(&apis[i]) {
			return
		}
	}
}

// supported reports whether the server serves version of key.
func supported(key, version int16) bool {
	if key < 0 || int(key) > maxKey {
		return false
	}
	a := &apis[key]
	return a.handle != nil && version >= a.min && version <= a.max
}

// apiVersionsKeys is the ApiVersions response's key list, shared read-only
// by every response. It is built on first use, when every file's init has
// registered its API.
var apiVersionsKeys = sync.OnceValue(func() []kmsg.ApiVersionsResponseApiKey {
	var keys []kmsg.ApiVersionsResponseApiKey
	for a := range served {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
		keys = append(keys, k)
	}
	return keys
})

// dispatch handles one decoded request of c, whose key checkHeader
// admitted. Requests answered on the spot are completed by their handler;
// group requests go to their group, which may park them.
func (s *Server) dispatch(c *conn, sl *slot, now time.Time) {
	if s.quotas.on() {
		sl.throttle = throttleMillis(s.quotas.charge(c, now))
	}
	apis[sl.key].handle(s, c, sl, now)
}

// errorResponse answers req, a request of a served key, with code (see
// api.errorResponse).
func errorResponse(req kmsg.Request, code int16) kmsg.Response {
	return apis[req.Key()].errorResponse(req, code)
}

// responseCode returns the error resp reports (see api.responseCode), 0
// for a response of a key the server does not serve.
func responseCode(resp kmsg.Response) int16 {
	key := resp.Key()
	if key < 0 || int(key) > maxKey || apis[key].responseCode == nil {
		return 0
	}
	return apis[key].responseCode(resp)
}

// firstCode returns the first error code of items that code reads as
// non-zero, 0 if none: the responseCode of a response that answers part
// by part.
func firstCode[T any](items []T, code func(*T) int16) int16 {
	for i := range items {
		if c := code(&items[i]); c != 0 {
			return c
		}
	}
	return 0
}
