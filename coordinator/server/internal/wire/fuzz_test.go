package wire

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// seeds is one frame body (no size prefix) for every key and version kmsg
// knows, each request at its defaults.
func seeds() [][]byte {
	var out [][]byte
	id := "seed"
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		req := kmsg.RequestForKey(key)
		if req == nil {
			continue
		}
		for v := int16(0); v <= req.MaxVersion(); v++ {
			req.SetVersion(v)
			out = append(out, AppendRequest(nil, 1, &id, req)[4:])
		}
	}
	return out
}

// decodeFrame decodes a whole frame body, header and request, for any key
// and version kmsg knows: the server serves a subset of them.
func decodeFrame(body []byte) (Header, kmsg.Request, error) {
	h, rest, err := ParseHeader(body)
	if err != nil {
		return h, nil, err
	}
	req := kmsg.RequestForKey(h.Key)
	if req == nil || h.Version < 0 || h.Version > req.MaxVersion() {
		return h, nil, ErrMalformed
	}
	if err := DecodeBody(req, h.Version, rest); err != nil {
		return h, nil, err
	}
	return h, req, nil
}

// FuzzDecodeFrame: decoding a frame never panics, and whatever decodes
// re-encodes to bytes that decode to the same encoding.
func FuzzDecodeFrame(f *testing.F) {
	for _, b := range seeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		h, req, err := decodeFrame(body)
		if err != nil {
			return
		}
		if req.Key() != h.Key || req.GetVersion() != h.Version {
			t.Fatalf("decoded %s v%d from header key %d v%d", kmsg.NameForKey(req.Key()), req.GetVersion(), h.Key, h.Version)
		}
		enc := AppendRequest(nil, h.Corr, nil, req)[4:]
		_, req2, err := decodeFrame(enc)
		if err != nil {
			t.Fatalf("re-encoded request does not decode: %v", err)
		}
		enc2 := AppendRequest(nil, h.Corr, nil, req2)[4:]
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("re-encoding is not stable:\n%x\n%x", enc, enc2)
		}
	})
}

// FuzzParseHeader: the request header decoder never panics, and what it
// decodes re-encodes to the bytes it read, leaving the rest of the frame
// as it was (a null client ID is any negative length, as in Kafka, and
// re-encodes as -1).
func FuzzParseHeader(f *testing.F) {
	for _, b := range seeds() {
		f.Add(b)
	}
	f.Add([]byte{0, 18, 0, 3, 0, 0, 0, 1, 0xff, 0xff})
	f.Add([]byte{0, 18, 0, 3, 0, 0, 0, 1, 0x7f, 0xff})
	f.Fuzz(func(t *testing.T, body []byte) {
		h, rest, err := ParseHeader(body)
		if err != nil {
			if len(body) >= MinHeaderSize && int16(binary.BigEndian.Uint16(body[8:])) < 0 {
				t.Fatalf("a header with a null client ID failed: %v", err)
			}
			return
		}
		enc := binary.BigEndian.AppendUint16(nil, uint16(h.Key))
		enc = binary.BigEndian.AppendUint16(enc, uint16(h.Version))
		enc = binary.BigEndian.AppendUint32(enc, uint32(h.Corr))
		want := body
		if h.HasClientID {
			enc = binary.BigEndian.AppendUint16(enc, uint16(len(h.ClientID)))
			enc = append(enc, h.ClientID...)
		} else {
			if n := int16(binary.BigEndian.Uint16(body[8:])); n >= 0 {
				t.Fatalf("client ID length %d decoded as null", n)
			}
			enc = binary.BigEndian.AppendUint16(enc, 0xffff)
			want = append(append(append([]byte(nil), body[:8]...), 0xff, 0xff), body[10:]...)
		}
		enc = append(enc, rest...)
		if !bytes.Equal(enc, want) {
			t.Fatalf("header %+v re-encodes to\n%x\nfrom\n%x", h, enc, body)
		}
	})
}

// TestSeedsDecode: every seed decodes, so the corpora start from valid
// input.
func TestSeedsDecode(t *testing.T) {
	for _, b := range seeds() {
		if _, _, err := decodeFrame(b); err != nil {
			t.Fatalf("seed %x: %v", b[:4], err)
		}
	}
}
