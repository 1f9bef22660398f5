package etcdstore

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/epoch"
)

// groupValueStrings are the strings the random records draw from: plain
// ones, and ones the fast paths must leave to the general encoder (a
// quote, a backslash, a control byte, non-ASCII, invalid UTF-8).
var groupValueStrings = []string{"", "", "orders", "bench", "/10.1.2.3", "hq0F3Jh_gGIwoTygd5badg", "<&>", "uniform",
	`a"b`, `c\d`, "\n", "\x7f", "ünï", "\xff"}

// randStr returns the string drawer of one random record: for three
// records in four only plain strings (the fast encoders' case), else any
// of groupValueStrings.
func randStr(rng *rand.Rand) func() string {
	plain := rng.IntN(4) > 0
	return func() string {
		s := groupValueStrings[rng.IntN(len(groupValueStrings))]
		if plain && !plainASCII(s) {
			return "t"
		}
		return s
	}
}

// randNum draws zero a quarter of the time, one of extremes a quarter,
// and else a number in [-span/2, span/2).
func randNum(rng *rand.Rand, extremes []int64, span int64) int64 {
	switch rng.IntN(4) {
	case 0:
		return 0
	case 1:
		return extremes[rng.IntN(len(extremes))]
	}
	return rng.Int64N(span) - span/2
}

// randGroupValueRecord is a group, member or assignment record drawn from
// rng, with plain strings most of the time (pick one per call to
// groupValueStrings otherwise), nil and empty slices, and extreme numbers.
func randGroupValueRecord(rng *rand.Rand) coordinator.Record {
	str := randStr(rng)
	i64 := func() int64 { return randNum(rng, []int64{math.MinInt64, math.MaxInt64, -1, 1}, 1<<40) }
	i32 := func() int32 {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return []int32{math.MinInt32, math.MaxInt32, -1, 1}[rng.IntN(4)]
		}
		return rng.Int32N(1000)
	}
	bytes := func() []byte {
		switch rng.IntN(3) {
		case 0:
			return nil
		case 1:
			return []byte{}
		}
		b := make([]byte, rng.IntN(9))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	size := func() int { // -1: nil
		return rng.IntN(6) - 1
	}
	topic := func(prev string) string { // runs: mostly the topic before
		if prev != "" && rng.IntN(3) > 0 {
			return prev
		}
		return str()
	}
	tps := func() []coordinator.TopicPartition {
		n := size()
		if n < 0 {
			return nil
		}
		l := make([]coordinator.TopicPartition, n)
		for i := range l {
			prev := ""
			if i > 0 {
				prev = l[i-1].Topic
			}
			l[i] = coordinator.TopicPartition{Topic: topic(prev), Partition: i32()}
		}
		return l
	}
	switch rng.IntN(3) {
	case 0:
		r := &coordinator.GroupRecord{Group: "g", Type: coordinator.GroupType(rng.IntN(256)), Epoch: i32(),
			ProtocolType: str(), Protocol: str(), Leader: str(), State: str(), Deleted: rng.IntN(2) == 0}
		if n := size(); n >= 0 {
			r.Targets = make([]coordinator.MemberTarget, n)
			for i := range r.Targets {
				r.Targets[i] = coordinator.MemberTarget{MemberID: str(), Target: tps()}
			}
		}
		return r
	case 1:
		r := &coordinator.MemberRecord{Group: "g", MemberID: "m", InstanceID: str(), ClientID: str(), ClientHost: str(),
			RackID: str(), SessionTimeout: time.Duration(i64()), RebalanceTimeout: time.Duration(i64()), TopicRegex: str(),
			ServerAssignor: str(), Drained: rng.IntN(4) == 0, RemoveWhenDrained: rng.IntN(4) == 0}
		if n := size(); n >= 0 {
			r.Topics = make([]string, n)
			for i := range r.Topics {
				r.Topics[i] = str()
			}
		}
		if n := size(); n >= 0 {
			r.Protocols = make([]coordinator.Protocol, n)
			for i := range r.Protocols {
				r.Protocols[i] = coordinator.Protocol{Name: str(), Metadata: bytes()}
			}
		}
		return r
	}
	r := &coordinator.AssignmentRecord{Group: "g", MemberID: "m", MemberEpoch: i32(), PrevEpoch: i32(), Raw: bytes()}
	if n := size(); n >= 0 {
		r.Owned = make([]coordinator.OwnedPartition, n)
		for i := range r.Owned {
			prev := ""
			if i > 0 {
				prev = r.Owned[i-1].Topic
			}
			r.Owned[i] = coordinator.OwnedPartition{Topic: topic(prev), Partition: i32(), Token: epoch.Token(i64())}
		}
	}
	if n := size(); n >= 0 {
		r.Provisional = make([]coordinator.ProvisionalPartition, n)
		for i := range r.Provisional {
			prev := ""
			if i > 0 {
				prev = r.Provisional[i-1].Topic
			}
			r.Provisional[i] = coordinator.ProvisionalPartition{Topic: topic(prev), Partition: i32(), Floor: epoch.Token(i64())}
		}
	}
	for _, l := range []*[]coordinator.TopicPartition{&r.Pending, &r.Revoking, &r.Target} {
		*l = tps()
	}
	return r
}

// checkEncodeGroupValue checks that the fast encoder of r's type writes
// the general encoder's bytes, and takes r when its strings are plain.
func checkEncodeGroupValue(t *testing.T, r coordinator.Record) {
	t.Helper()
	var want, got []byte
	var ok bool
	var strs []string
	dst := []byte("prefix")
	switch r := r.(type) {
	case *coordinator.GroupRecord:
		want = marshalGroup(r)
		got, ok = appendGroupFast(dst, r)
		strs = []string{r.ProtocolType, r.Protocol, r.Leader, r.State}
		for _, t := range r.Targets {
			strs = append(strs, t.MemberID)
			for _, p := range t.Target {
				strs = append(strs, p.Topic)
			}
		}
	case *coordinator.MemberRecord:
		want = marshalMember(r)
		got, ok = appendMemberFast(dst, r)
		strs = append([]string{r.InstanceID, r.ClientID, r.ClientHost, r.RackID, r.TopicRegex, r.ServerAssignor}, r.Topics...)
		for _, p := range r.Protocols {
			strs = append(strs, p.Name)
		}
	case *coordinator.AssignmentRecord:
		want = marshalAssignment(r)
		got, ok = appendAssignmentFast(dst, r)
		for _, p := range r.Owned {
			strs = append(strs, p.Topic)
		}
		for _, p := range r.Provisional {
			strs = append(strs, p.Topic)
		}
		for _, l := range [][]coordinator.TopicPartition{r.Pending, r.Revoking, r.Target} {
			for _, p := range l {
				strs = append(strs, p.Topic)
			}
		}
	}
	plain := true
	for _, s := range strs {
		plain = plain && plainASCII(s)
	}
	checkFastEncoder(t, r, want, got, ok, plain)
}

// checkDecodeGroupValue checks that whatever a fast decoder takes, the
// general decoder accepts and reads alike.
func checkDecodeGroupValue(t *testing.T, data []byte) (taken int) {
	t.Helper()
	check := func(fast value, ok bool, slow value) {
		if !ok {
			return
		}
		taken++
		if err := unmarshal(data, slow); err != nil {
			t.Fatalf("the fast path took %q as %T, which the general decoder refuses: %v", data, slow, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q: the fast path read %+v, the general decoder %+v", data, fast, slow)
		}
	}
	g, ok := decodeGroupFast(data)
	check(&g, ok, &groupValue{})
	m, ok := decodeMemberFast(data)
	check(&m, ok, &memberValue{})
	if a, ok := decodeAssignmentFast("g", "m", data); ok {
		taken++
		var v assignmentValue
		if err := unmarshal(data, &v); err != nil {
			t.Fatalf("the fast path took %q as an assignment, which the general decoder refuses: %v", data, err)
		}
		slow, err := assignmentFromValue("g", "m", &v)
		if err != nil {
			t.Fatalf("the fast path took %q as an assignment, which the general decoder refuses: %v", data, err)
		}
		if !reflect.DeepEqual(a, slow) {
			t.Fatalf("%q: the fast path read %+v, the general decoder %+v", data, a, slow)
		}
	}
	return taken
}

// TestGroupValuesFast runs the fuzz targets' checks over random records:
// each encoded alike by both encoders, and, encoded, read alike by both
// decoders, the fast one taking every value with plain strings (else it
// would save nothing) and giving the record back.
func TestGroupValuesFast(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 9))
	pk := map[string]parsedKey{
		"g": {kind: kindGroup, group: "g"},
		"m": {kind: kindMember, group: "g", name: "m"},
		"a": {kind: kindAssignment, group: "g", name: "m"},
	}
	fast := 0
	for range 20000 {
		r := randGroupValueRecord(rng)
		checkEncodeGroupValue(t, r)
		data := encodeValue(r)
		checkDecodeGroupValue(t, data)
		var k parsedKey
		var ok, plain bool
		switch r := r.(type) {
		case *coordinator.GroupRecord:
			k = pk["g"]
			_, ok = decodeGroupFast(data)
			_, plain = appendGroupFast(nil, r)
		case *coordinator.MemberRecord:
			k = pk["m"]
			_, ok = decodeMemberFast(data)
			_, plain = appendMemberFast(nil, r)
		case *coordinator.AssignmentRecord:
			k = pk["a"]
			_, ok = decodeAssignmentFast("g", "m", data)
			_, plain = appendAssignmentFast(nil, r)
		}
		if plain && !ok {
			t.Fatalf("%s: written by the fast encoder, but not taken", data)
		}
		if ok {
			fast++
		}
		got, err := decodeValue(k, data)
		if err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		if g, ok := r.(*coordinator.GroupRecord); ok {
			g.Type = coordinator.GroupType(uint8(g.Type))
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("%s: read back as %+v, want %+v", data, got, r)
		}
	}
	if fast < 10000 {
		t.Fatalf("the fast decoders took %d of 20000 values", fast)
	}
}

// FuzzEncodeGroupValues checks that the fast encoders write what the
// general one writes, byte for byte, for records drawn from a seed.
func FuzzEncodeGroupValues(f *testing.F) {
	for s := range uint64(16) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, seed>>32))
		for range 8 {
			checkEncodeGroupValue(t, randGroupValueRecord(rng))
		}
	})
}

// FuzzDecodeGroupValues checks that the fast decoders take only what the
// general decoder accepts, and read it alike.
func FuzzDecodeGroupValues(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 32 {
		f.Add(encodeValue(randGroupValueRecord(rng)))
	}
	for _, s := range []string{
		`{}`, ` {}`, `{} `, `{"e":1,}`, `{"e":01}`, `{"e":-0}`, `{"e":1.0}`, `{"e":1e3}`, `{"E":1}`, `{"e":1,"e":2}`,
		`{"e":2147483648}`, `{"e":-2147483649}`, `{"t":256}`, `{"t":-1}`, `{"t":255,"d":true}`, `{"d":false}`, `{"d":null}`,
		`{"v":2}`, `{"v":3}`, `{"v":-1}`, `{"x":true,"c":"YQ=="}`, `{"c":"\u0041"}`, `{"ts":null}`, `{"ts":[]}`, `{"ts":["a",]}`,
		`{"ps":[{}]}`, `{"ps":[{"m":""}]}`, `{"ps":[{"n":"r","m":"AAE="}]}`, `{"ps":[{"m":"AAE"}]}`, `{"ps":[{"m":"A A="}]}`,
		`{"st":9223372036854775807,"rt":-9223372036854775808}`, `{"st":9223372036854775808}`,
		`{"o":[{"t":"a","p":[1,2],"k":[3,4]}],"tg":[{"t":"a","p":[1,2]}]}`, `{"o":[{"t":"a","p":[1],"k":[]}]}`, `{"o":[{"t":"a","p":[1],"k":[1,2]}]}`, `{"o":[{"t":"a","k":[]}]}`,
		`{"o":[{"t":"a","p":[1],"k":[2]},{"t":"a","p":[3],"k":[4]},{"t":"b","p":[5],"k":[6]}],"pv":[{"t":"a","p":[3],"k":[4]}]}`,
		`{"tg":[{"t":"a","p":[1],"k":[2]}]}`, `{"tg":[{"t":"a","p":[1],"k":[null]}]}`, `{"tg":[{"t":"ab","p":[1]},{"t":"a","p":[2]}]}`,
		`{"tg":[{"t":"a","p":[1]},{"t":"a\"","p":[2]}]}`, `{"tg":[{"t":"","p":[1]},{"t":"","p":[2]}]}`,
		`{"v":3,"e":2,"tg":[{"m":"a","t":[{"t":"x","p":[1,2]}]},{"m":"b"}]}`, `{"tg":[]}`, `{"tg":[{}]}`, `{"tg":[{"m":""}]}`,
		`{"tg":[{"t":[],"m":"a"}]}`, `{"tg":[{"m":"a","t":[{"t":"x","p":[1],"k":[5]}]}]}`, `{"tg":[{"m":"a","t":[{"t":"x"}]}]}`,
		`{"tg":[{"m":"a","t":[{"t":"x","p":[]},{"t":"x","p":[3]}]}]}`, `{"tg":[{"m":"a","t":null}]}`, `{"tg":null}`, `{"tg":[{"m":"a","x":1}]}`,
		`{"o":[{"p":[1]}]}`, `{"o":[{"t":"a","p":null}]}`, `{"o":[{"t":"a","p":[1],"x":1}]}`, `{"o":[]}`, `{"o":[{}]}`,
		`{"pn":[{"t":"a","p":[2147483648]}]}`, `{"raw":""}`, `{"raw":"AAE="}`, `{"raw":"AAE"}`, `{"raw":null}`,
		`{"e":1,"pe":2,"o":[{"t":"a","p":[1],"k":[1]}]}x`, `{"pe":2,"e":1}`, `{"e":1 }`, `{"e" :1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecodeGroupValue(t, data)
	})
}
