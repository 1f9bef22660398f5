package coordinator

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
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
				fillValue(t, reflect.ValueOf(used).Elem())
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

// fillValue sets every exported field of v to a non-zero value.
func fillValue(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() && f.Type != reflect.TypeFor[kmsg.Tags]() {
				fillValue(t, v.Field(i))
			}
		}
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float64:
		v.SetFloat(1)
	case reflect.Array:
		for i := range v.Len() {
			fillValue(t, v.Index(i))
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fillValue(t, s.Index(0))
		v.Set(s)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillValue(t, p.Elem())
		v.Set(p)
	default:
		t.Fatalf("fill: no value for a %s", v.Type())
	}
}
