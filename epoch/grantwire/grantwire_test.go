package grantwire_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/epoch/grantwire"
)

func sample() grantwire.Grants {
	return grantwire.Grants{Key: "0123456789abcdef", Grants: []grantwire.Grant{
		{TopicID: [16]byte{1, 2}, Partition: 0, Token: 7, Sig: string(bytes.Repeat([]byte{9}, 64))},
		{TopicID: [16]byte{3}, Partition: 2147483647, Token: 1 << 40, Sig: string(bytes.Repeat([]byte{8}, 64))},
	}}
}

// TestStockDecoderSkipsTheField: a response with the field, encoded and
// read back by kmsg as a stock kgo client reads it, carries every field
// as without it, and keeps the grants among its unknown tags.
func TestStockDecoderSkipsTheField(t *testing.T) {
	for _, resp := range []kmsg.Response{
		&kmsg.ConsumerGroupHeartbeatResponse{Version: 1, MemberID: kmsg.StringPtr("m"), MemberEpoch: 5, HeartbeatIntervalMillis: 1000,
			Assignment: &kmsg.ConsumerGroupHeartbeatResponseAssignment{Topics: []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{{TopicID: [16]byte{1, 2}, Partitions: []int32{0}}}}},
		&kmsg.SyncGroupResponse{Version: 5, ProtocolType: kmsg.StringPtr("consumer"), Protocol: kmsg.StringPtr("range"), MemberAssignment: []byte{0, 1, 2}},
		&kmsg.HeartbeatResponse{Version: 4},
	} {
		plain := resp.AppendTo(nil)
		grantwire.Put(grantwire.TagsOf(resp), sample())
		withTags := resp.AppendTo(nil)
		*grantwire.TagsOf(resp) = kmsg.Tags{}
		if bytes.Equal(plain, withTags) {
			t.Fatalf("%T: the field changed nothing on the wire", resp)
		}
		back := kmsg.ResponseForKey(resp.Key())
		back.SetVersion(resp.GetVersion())
		if err := back.ReadFrom(withTags); err != nil {
			t.Fatalf("%T: kmsg cannot read it back: %v", resp, err)
		}
		// Without the field, it encodes as the plain response did.
		tags := grantwire.TagsOf(back)
		gs, ok, err := grantwire.From(tags)
		if !ok || err != nil || len(gs.Grants) != 2 || gs.Key != "0123456789abcdef" {
			t.Fatalf("%T: grants read back %+v, %v, %v", resp, gs, ok, err)
		}
		*tags = kmsg.Tags{}
		if !bytes.Equal(back.AppendTo(nil), plain) {
			t.Fatalf("%T: read back, it is not the response without the field", resp)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	want := sample()
	got, err := grantwire.Parse(grantwire.Append(nil, want))
	if err != nil {
		t.Fatal(err)
	}
	if got.Key != want.Key || len(got.Grants) != len(want.Grants) {
		t.Fatalf("got %+v", got)
	}
	for i := range want.Grants {
		if got.Grants[i] != want.Grants[i] {
			t.Fatalf("grant %d = %+v, want %+v", i, got.Grants[i], want.Grants[i])
		}
	}
	st := got.Signed(got.Grants[0], "m")
	if st != (epoch.SignedToken{Token: 7, Member: "m", Key: want.Key, Sig: want.Grants[0].Sig}) {
		t.Fatalf("Signed = %+v", st)
	}
	empty, err := grantwire.Parse(grantwire.Append(nil, grantwire.Grants{Key: want.Key}))
	if err != nil || len(empty.Grants) != 0 {
		t.Fatalf("no grants: %+v, %v", empty, err)
	}
}

func TestParseRefuses(t *testing.T) {
	good := grantwire.Append(nil, sample())
	for name, b := range map[string][]byte{
		"empty":          nil,
		"short header":   good[:5],
		"version 2":      append([]byte{2}, good[1:]...),
		"count too high": append(append(append([]byte{}, good[:9]...), 3), good[10:]...),
		"trailing byte":  append(append([]byte{}, good...), 0),
		"cut entry":      good[:len(good)-1],
		"bad varint":     append(append([]byte{}, good[:9]...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
		"huge count":     append(append([]byte{}, good[:9]...), 0xff, 0xff, 0xff, 0xff, 0x0f),
	} {
		if gs, err := grantwire.Parse(b); !errors.Is(err, grantwire.ErrMalformed) {
			t.Errorf("%s: Parse = %+v, %v; want ErrMalformed", name, gs, err)
		}
	}
}

// FuzzParse: whatever the bytes, Parse returns or fails without panicking,
// and what it accepts encodes back to exactly the same bytes.
func FuzzParse(f *testing.F) {
	f.Add(grantwire.Append(nil, sample()))
	f.Add(grantwire.Append(nil, grantwire.Grants{Key: "0123456789abcdef"}))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		gs, err := grantwire.Parse(b)
		if err != nil {
			return
		}
		if again := grantwire.Append(nil, gs); !bytes.Equal(again, b) {
			t.Fatalf("Parse(%x) = %+v, which encodes as %x", b, gs, again)
		}
	})
}
