package server

import (
	"bytes"
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/internal/kmsgtest"
)

// TestAPITable checks the table built from the registrations: it admits
// exactly the registered keys and versions, ApiVersions lists them, and
// each registration holds for every version it serves (checkAPI).
func TestAPITable(t *testing.T) {
	var listed []int16
	for _, k := range apiVersionsKeys() {
		listed = append(listed, k.ApiKey)
	}
	var registered []int16
	for a := range served {
		registered = append(registered, a.key)
		t.Run(kmsg.NameForKey(a.key), func(t *testing.T) { checkAPI(t, a) })
	}
	if !reflect.DeepEqual(listed, registered) {
		t.Errorf("ApiVersions lists %v, the table holds %v", listed, registered)
	}
	for k := range int16(maxKey + 1) {
		err := checkHeader(header{Key: k})
		switch {
		case !kmsgKeys[k]:
			if err != errUnknownKey {
				t.Errorf("key %d, unknown to kmsg: %v", k, err)
			}
		case apis[k].handle == nil:
			if err != errUnsupportedKey {
				t.Errorf("%s, not registered: %v", kmsg.NameForKey(k), err)
			}
		}
	}
}

// checkAPI checks one registration at every version in its range:
//
//   - the key is served exactly from min to max, and it is registered in
//     its own file, NN_name.go;
//   - a request with every field set decodes as the server decodes it (into
//     the slot's object when the registration reuses one), and re-encodes
//     to the same bytes;
//   - aliasFree holds both ways: overwriting the frame after decoding
//     changes the request's encoding if and only if the key is not
//     alias-free;
//   - reused request and response objects come back reset;
//   - errorResponse answers with a response of the same key and version
//     that responseCode reads the code from, that encodes, and that
//     decodes back to the same bytes and the same code; an empty
//     response's code is 0.
func checkAPI(t *testing.T, a *api) {
	if a.handle == nil || a.errorResponse == nil || a.responseCode == nil {
		t.Fatal("registered without a handler, error response or response code")
	}
	file, _ := runtime.FuncForPC(reflect.ValueOf(a.handle).Pointer()).FileLine(reflect.ValueOf(a.handle).Pointer())
	if prefix := fmt.Sprintf("%02d_", a.key); !strings.HasPrefix(filepath.Base(file), prefix) {
		t.Errorf("handler in %s, not in a file named %s*.go", filepath.Base(file), prefix)
	}
	if supported(a.key, a.min-1) || supported(a.key, a.max+1) {
		t.Errorf("served outside v%d-%d", a.min, a.max)
	}
	aliases := false
	for v := a.min; v <= a.max; v++ {
		if !supported(a.key, v) {
			t.Fatalf("v%d: not served", v)
		}
		if err := checkHeader(header{Key: a.key, Version: v}); err != nil {
			t.Fatalf("v%d: header refused: %v", v, err)
		}
		want := kmsg.RequestForKey(a.key)
		kmsgtest.Fill(t, reflect.ValueOf(want).Elem())
		want.SetVersion(v)
		enc := want.AppendTo(nil)

		sl := &slot{key: a.key, version: v}
		frame := enc
		if want.IsFlexible() {
			frame = append([]byte{0}, enc...) // the header's tag section
		}
		req := sl.request(a.key)
		if err := decodeBody(req, v, frame); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		got := req.AppendTo(nil)
		if !bytes.Equal(got, enc) {
			t.Fatalf("v%d: decoding does not round-trip:\n%x\n%x", v, enc, got)
		}
		for i := range frame {
			frame[i] ^= 0xff
		}
		if !bytes.Equal(req.AppendTo(nil), got) {
			aliases = true
			if a.aliasFree {
				t.Errorf("v%d: alias-free, but the decoded request changes with the frame", v)
			}
		}

		if a.request != nil {
			other := &slot{key: a.key, version: v}
			kmsgtest.Fill(t, reflect.ValueOf(other.request(a.key)).Elem())
			if r := other.request(a.key); r.Key() != a.key || !reflect.ValueOf(r).Elem().IsZero() {
				t.Errorf("v%d: reused request not reset: %+v", v, r)
			}
		}
		if a.response != nil {
			// The slot's own response, every time: the core resets it
			// (coordinator's TestResponseReset).
			other := &slot{key: a.key, version: v}
			if r := other.response(); r.Key() != a.key || r != other.response() {
				t.Errorf("v%d: the reused response is a %s, or not the slot's own", v, kmsg.NameForKey(r.Key()))
			}
		}

		if code := responseCode(req.ResponseKind()); code != 0 {
			t.Errorf("v%d: empty response reports code %d", v, code)
		}
		for _, code := range []int16{kerr.CoordinatorNotAvailable.Code, kerr.InvalidGroupID.Code} {
			resp := errorResponse(req, code)
			if resp.Key() != a.key || resp.GetVersion() != v {
				t.Fatalf("v%d: error response is %s v%d", v, kmsg.NameForKey(resp.Key()), resp.GetVersion())
			}
			if got := responseCode(resp); got != code {
				t.Errorf("v%d: error response with code %d reports %d", v, code, got)
			}
			b := resp.AppendTo(nil)
			back := req.ResponseKind()
			if err := back.ReadFrom(b); err != nil {
				t.Fatalf("v%d: error response does not decode: %v", v, err)
			}
			if !bytes.Equal(back.AppendTo(nil), b) {
				t.Errorf("v%d: error response does not round-trip", v)
			}
			// OffsetFetch v0-1 carries a group's error only per
			// partition, where responseCode does not look.
			if got := responseCode(back); got != code && !(a.key == 9 && v <= 1) {
				t.Errorf("v%d: error response with code %d reaches the client as %d", v, code, got)
			}
		}
	}
	if !a.aliasFree && !aliases {
		t.Errorf("decoded from a copy of the frame, but no version aliases it: mark it aliasFree")
	}
}
