package coordinator

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/internal/kmsgtest"
)

// TestResponseReset checks the core's side of Request.Resp: a reused
// response of every kind the core fills comes back as a new one would, at
// the request's version, whatever an earlier use left in it; a response of
// another kind, or none, is replaced by a new one.
func TestResponseReset(t *testing.T) {
	for _, tc := range []struct {
		req   kmsg.Request
		reset func(r kmsg.Response, version int16) kmsg.Response
	}{
		{new(kmsg.JoinGroupRequest), func(r kmsg.Response, v int16) kmsg.Response { return response[kmsg.JoinGroupResponse](r, v) }},
		{new(kmsg.SyncGroupRequest), func(r kmsg.Response, v int16) kmsg.Response { return response[kmsg.SyncGroupResponse](r, v) }},
		{new(kmsg.HeartbeatRequest), func(r kmsg.Response, v int16) kmsg.Response { return response[kmsg.HeartbeatResponse](r, v) }},
		{new(kmsg.LeaveGroupRequest), func(r kmsg.Response, v int16) kmsg.Response { return response[kmsg.LeaveGroupResponse](r, v) }},
		{new(kmsg.ConsumerGroupHeartbeatRequest), func(r kmsg.Response, v int16) kmsg.Response {
			return response[kmsg.ConsumerGroupHeartbeatResponse](r, v)
		}},
		{new(kmsg.OffsetDeleteRequest), func(r kmsg.Response, v int16) kmsg.Response { return response[kmsg.OffsetDeleteResponse](r, v) }},
	} {
		t.Run(kmsg.NameForKey(tc.req.Key()), func(t *testing.T) {
			for v := range tc.req.MaxVersion() + 1 {
				tc.req.SetVersion(v)
				want := tc.req.ResponseKind()
				used := tc.req.ResponseKind()
				kmsgtest.Fill(t, reflect.ValueOf(used).Elem())
				if got := tc.reset(used, v); got != used || !reflect.DeepEqual(got, want) {
					t.Errorf("v%d: reused response comes back as %+v, not %+v", v, got, want)
				}
				for _, other := range []kmsg.Response{nil, new(kmsg.OffsetFetchResponse)} {
					if got := tc.reset(other, v); !reflect.DeepEqual(got, want) {
						t.Errorf("v%d: given %T, got %+v, not a new %+v", v, other, got, want)
					}
				}
			}
		})
	}
}
