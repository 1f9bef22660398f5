package etcdstore

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/epoch"
)

// Values are JSON objects with short field names, readable with etcdctl
// (docs/STORE.md lists the fields). What the key says (group, member ID,
// topic, partition) is not repeated in the value.
//
// Versioning: "v" is the value's encoding version, absent for version 1.
// A new field means a new version, because a decoder refuses fields it does
// not know: an old tenure must not silently drop what a newer one wrote.
//
// Exactness: zero values are omitted and decode to zero, a nil slice is
// omitted while an empty one is written as [], and a nil *string is
// omitted while a pointer to "" is written as "". JSON strings must be
// UTF-8, and Kafka strings need not be: a record with any string that is
// not valid UTF-8 has "x":true and every string of it in base64.
const valueVersion = 3

// Version 2 added the members' drained flags (written with "v":2 only when
// set) and the generation log's values; version 3 the group's targets
// (written with "v":3 only when the record has them).

type groupValue struct {
	V            int    `json:"v,omitzero"`
	X            bool   `json:"x,omitzero"`
	Type         uint8  `json:"t,omitzero"`
	Epoch        int32  `json:"e,omitzero"`
	ProtocolType string `json:"pt,omitzero"`
	Protocol     string `json:"p,omitzero"`
	Leader       string `json:"l,omitzero"`
	State        string `json:"s,omitzero"`
	Deleted      bool   `json:"d,omitzero"`
	// Targets are the record's Targets (v3).
	Targets []targetValue `json:"tg,omitzero"`
}

// targetValue is one member's target in a group value.
type targetValue struct {
	Member string  `json:"m"`
	Target []tpRun `json:"t,omitzero"`
}

type memberValue struct {
	V                int             `json:"v,omitzero"`
	X                bool            `json:"x,omitzero"`
	InstanceID       string          `json:"i,omitzero"`
	ClientID         string          `json:"c,omitzero"`
	ClientHost       string          `json:"h,omitzero"`
	RackID           string          `json:"r,omitzero"`
	SessionTimeout   int64           `json:"st,omitzero"` // nanoseconds
	RebalanceTimeout int64           `json:"rt,omitzero"` // nanoseconds
	Topics           []string        `json:"ts,omitzero"`
	TopicRegex       string          `json:"re,omitzero"`
	ServerAssignor   string          `json:"sa,omitzero"`
	Protocols        []protocolValue `json:"ps,omitzero"`
	Drained          bool            `json:"dr,omitzero"` // v2
	RemoveDrained    bool            `json:"rd,omitzero"` // v2
}

// generationValue is a generation log entry (v2). Moves are in the
// record's order; times are Unix nanoseconds.
type generationValue struct {
	V             int         `json:"v,omitzero"`
	X             bool        `json:"x,omitzero"`
	Type          uint8       `json:"t,omitzero"`
	Time          int64       `json:"at,omitzero"`
	Reason        string      `json:"r,omitzero"`
	Members       int         `json:"n,omitzero"`
	Joined        []string    `json:"j,omitzero"`
	Left          []string    `json:"l,omitzero"`
	Moves         []moveValue `json:"m,omitzero"`
	MinMoves      int         `json:"mm,omitzero"`
	Assigned      bool        `json:"a,omitzero"`
	Done          bool        `json:"hd,omitzero"`
	Completed     int64       `json:"hc,omitzero"`
	Granted       int         `json:"hg,omitzero"`
	Superseded    int         `json:"hs,omitzero"`
	Unowned       int64       `json:"hu,omitzero"`
	MaxUnowned    int64       `json:"hm,omitzero"`
	AfterFailover int64       `json:"af,omitzero"`
	Trim          int32       `json:"tr,omitzero"`
}

type moveValue struct {
	Topic     string `json:"t"`
	Partition int32  `json:"p,omitzero"`
	From      string `json:"f,omitzero"`
	OldToken  int64  `json:"fk,omitzero"`
	To        string `json:"to,omitzero"`
	NewToken  int64  `json:"tk,omitzero"`
}

type protocolValue struct {
	Name     string `json:"n,omitzero"`
	Metadata []byte `json:"m,omitzero"`
}

// The partition lists of an assignment are runs of one topic, in the
// record's order: {"t":"jobs","p":[0,1,2]}. The lists are sorted by topic,
// so a member's list has one run per topic; an unsorted list still
// round-trips exactly, in more runs.
type assignmentValue struct {
	V           int     `json:"v,omitzero"`
	X           bool    `json:"x,omitzero"`
	MemberEpoch int32   `json:"e,omitzero"`
	PrevEpoch   int32   `json:"pe,omitzero"`
	Owned       []tpRun `json:"o,omitzero"`
	Provisional []tpRun `json:"pv,omitzero"`
	Pending     []tpRun `json:"pn,omitzero"`
	Revoking    []tpRun `json:"rv,omitzero"`
	Target      []tpRun `json:"tg,omitzero"`
	Raw         []byte  `json:"raw,omitzero"`
}

// tpRun is partitions of one topic; K holds the tokens (Owned) or floors
// (Provisional), one per partition.
type tpRun struct {
	Topic      string  `json:"t"`
	Partitions []int32 `json:"p"`
	K          []int64 `json:"k,omitzero"`
}

type offsetValue struct {
	V           int     `json:"v,omitzero"`
	X           bool    `json:"x,omitzero"`
	Offset      int64   `json:"o,omitzero"`
	LeaderEpoch int32   `json:"le,omitzero"`
	Metadata    *string `json:"md,omitzero"`
	Token       int64   `json:"k,omitzero"`
	MemberID    string  `json:"m,omitzero"`
	// Folded is the order of a partition key written by a fold (fold.go):
	// the revision of the batch its value came from. Never in a batch
	// entry, nor in the value of an OffsetRecord's encoding.
	Folded int64 `json:"fr,omitzero"`
}

type topicValue struct {
	V          int    `json:"v,omitzero"`
	X          bool   `json:"x,omitzero"`
	ID         string `json:"id,omitzero"` // Kafka's form: base64url, unpadded
	Partitions int32  `json:"n,omitzero"`
}

// strs lists a value's strings, for the base64 fallback.
func (v *groupValue) strs() []*string {
	s := []*string{&v.ProtocolType, &v.Protocol, &v.Leader, &v.State}
	for i := range v.Targets {
		s = append(s, &v.Targets[i].Member)
		for j := range v.Targets[i].Target {
			s = append(s, &v.Targets[i].Target[j].Topic)
		}
	}
	return s
}

func (v *memberValue) strs() []*string {
	s := []*string{&v.InstanceID, &v.ClientID, &v.ClientHost, &v.RackID, &v.TopicRegex, &v.ServerAssignor}
	for i := range v.Topics {
		s = append(s, &v.Topics[i])
	}
	for i := range v.Protocols {
		s = append(s, &v.Protocols[i].Name)
	}
	return s
}

func (v *assignmentValue) strs() []*string {
	var s []*string
	for _, runs := range [][]tpRun{v.Owned, v.Provisional, v.Pending, v.Revoking, v.Target} {
		for i := range runs {
			s = append(s, &runs[i].Topic)
		}
	}
	return s
}

func (v *offsetValue) strs() []*string {
	s := []*string{&v.MemberID}
	if v.Metadata != nil {
		s = append(s, v.Metadata)
	}
	return s
}

func (v *topicValue) strs() []*string { return nil }

func (v *generationValue) strs() []*string {
	s := []*string{&v.Reason}
	for i := range v.Joined {
		s = append(s, &v.Joined[i])
	}
	for i := range v.Left {
		s = append(s, &v.Left[i])
	}
	for i := range v.Moves {
		s = append(s, &v.Moves[i].Topic, &v.Moves[i].From, &v.Moves[i].To)
	}
	return s
}

// unixNano is t in Unix nanoseconds, 0 for the zero time.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// value is what every value type has.
type value interface {
	strs() []*string
	header() (v *int, x *bool)
}

func (v *groupValue) header() (*int, *bool)      { return &v.V, &v.X }
func (v *memberValue) header() (*int, *bool)     { return &v.V, &v.X }
func (v *assignmentValue) header() (*int, *bool) { return &v.V, &v.X }
func (v *offsetValue) header() (*int, *bool)     { return &v.V, &v.X }
func (v *topicValue) header() (*int, *bool)      { return &v.V, &v.X }
func (v *generationValue) header() (*int, *bool) { return &v.V, &v.X }

// encodeValue returns the value of the key a record writes; deletions
// (other than a group's tombstone) have none and are not given here.
func encodeValue(r coordinator.Record) []byte {
	switch r := r.(type) {
	case *coordinator.GroupRecord:
		if b, ok := appendGroupFast(nil, r); ok {
			return b
		}
		return marshalGroup(r)
	case *coordinator.MemberRecord:
		if b, ok := appendMemberFast(nil, r); ok {
			return b
		}
		return marshalMember(r)
	case *coordinator.AssignmentRecord:
		if b, ok := appendAssignmentFast(nil, r); ok {
			return b
		}
		return marshalAssignment(r)
	case *coordinator.OffsetRecord:
		if b, ok := appendOffsetFast(nil, r); ok {
			return b
		}
		return marshalOffset(r)
	case *coordinator.TopicRecord:
		v := &topicValue{Partitions: r.Partitions}
		if r.ID != (coordinator.TopicID{}) {
			v.ID = base64.RawURLEncoding.EncodeToString(r.ID[:])
		}
		return marshal(v)
	case *coordinator.GenerationRecord:
		if b, ok := appendGenerationFast(nil, r); ok {
			return b
		}
		return marshalGeneration(r)
	}
	panic(fmt.Sprintf("etcdstore: encodeValue of %T", r)) // store.Check admitted it
}

// marshalGeneration is the general encoder of a generation log entry.
func marshalGeneration(r *coordinator.GenerationRecord) []byte {
	h := &r.Handoff
	v := &generationValue{
		V: 2, Type: uint8(r.Type), Time: unixNano(r.Time), Reason: r.Reason, Members: r.Members,
		Joined: slices.Clone(r.Joined), Left: slices.Clone(r.Left), MinMoves: r.MinMoves, Assigned: r.Assigned,
		Done: h.Done, Completed: unixNano(h.Completed), Granted: h.Granted, Superseded: h.Superseded,
		Unowned: int64(h.Unowned), MaxUnowned: int64(h.MaxUnowned), AfterFailover: unixNano(r.AfterFailover),
		Trim: r.Trim,
	}
	if r.Moves != nil {
		v.Moves = make([]moveValue, len(r.Moves))
		for i, m := range r.Moves {
			v.Moves[i] = moveValue{Topic: m.Topic, Partition: m.Partition, From: m.From, OldToken: int64(m.OldToken), To: m.To, NewToken: int64(m.NewToken)}
		}
	}
	return marshal(v)
}

// marshalGroup is the general encoder of a group value.
func marshalGroup(r *coordinator.GroupRecord) []byte {
	v := &groupValue{
		Type: uint8(r.Type), Epoch: r.Epoch, ProtocolType: r.ProtocolType, Protocol: r.Protocol,
		Leader: r.Leader, State: r.State, Deleted: r.Deleted,
	}
	if r.Targets != nil {
		v.V = 3
		v.Targets = make([]targetValue, len(r.Targets))
		for i, t := range r.Targets {
			v.Targets[i] = targetValue{Member: t.MemberID, Target: runs(t.Target, tpOf, false)}
		}
	}
	return marshal(v)
}

// marshalMember is the general encoder of a member value.
func marshalMember(r *coordinator.MemberRecord) []byte {
	v := &memberValue{
		InstanceID: r.InstanceID, ClientID: r.ClientID, ClientHost: r.ClientHost, RackID: r.RackID,
		SessionTimeout: int64(r.SessionTimeout), RebalanceTimeout: int64(r.RebalanceTimeout),
		TopicRegex: r.TopicRegex, ServerAssignor: r.ServerAssignor,
		Drained: r.Drained, RemoveDrained: r.RemoveWhenDrained,
	}
	if v.Drained || v.RemoveDrained {
		v.V = 2
	}
	if r.Topics != nil {
		v.Topics = append(make([]string, 0, len(r.Topics)), r.Topics...)
	}
	if r.Protocols != nil {
		v.Protocols = make([]protocolValue, len(r.Protocols))
		for i, p := range r.Protocols {
			v.Protocols[i] = protocolValue{Name: p.Name, Metadata: p.Metadata}
		}
	}
	return marshal(v)
}

// marshalAssignment is the general encoder of an assignment value.
func marshalAssignment(r *coordinator.AssignmentRecord) []byte {
	v := &assignmentValue{MemberEpoch: r.MemberEpoch, PrevEpoch: r.PrevEpoch, Raw: r.Raw}
	v.Owned = runs(r.Owned, func(p coordinator.OwnedPartition) (string, int32, int64) {
		return p.Topic, p.Partition, int64(p.Token)
	}, true)
	v.Provisional = runs(r.Provisional, func(p coordinator.ProvisionalPartition) (string, int32, int64) {
		return p.Topic, p.Partition, int64(p.Floor)
	}, true)
	v.Pending = runs(r.Pending, tpOf, false)
	v.Revoking = runs(r.Revoking, tpOf, false)
	v.Target = runs(r.Target, tpOf, false)
	return marshal(v)
}

// marshalOffset is the general encoder of an offset value.
func marshalOffset(r *coordinator.OffsetRecord) []byte {
	v := &offsetValue{Offset: r.Offset, LeaderEpoch: r.LeaderEpoch, Token: int64(r.Token), MemberID: r.MemberID}
	if r.Metadata != nil {
		md := *r.Metadata
		v.Metadata = &md
	}
	return marshal(v)
}

func tpOf(p coordinator.TopicPartition) (string, int32, int64) { return p.Topic, p.Partition, 0 }

// runs groups a partition list into runs of one topic, keeping its order
// and its nil-ness.
func runs[P any](ps []P, split func(P) (string, int32, int64), withK bool) []tpRun {
	if ps == nil {
		return nil
	}
	out := make([]tpRun, 0, 1)
	for _, p := range ps {
		t, part, k := split(p)
		if n := len(out); n == 0 || out[n-1].Topic != t {
			out = append(out, tpRun{Topic: t})
		}
		r := &out[len(out)-1]
		r.Partitions = append(r.Partitions, part)
		if withK {
			r.K = append(r.K, k)
		}
	}
	return out
}

// unruns inverts runs.
func unruns[P any](rs []tpRun, join func(t string, part int32, k int64) P, withK bool) ([]P, error) {
	if rs == nil {
		return nil, nil
	}
	n := 0
	for _, r := range rs {
		if withK && len(r.K) != len(r.Partitions) {
			return nil, errors.New("a partition run has not one token per partition")
		}
		n += len(r.Partitions)
	}
	out := make([]P, 0, n)
	for _, r := range rs {
		for i, part := range r.Partitions {
			var k int64
			if withK {
				k = r.K[i]
			}
			out = append(out, join(r.Topic, part, k))
		}
	}
	return out, nil
}

// marshal encodes v, with the base64 fallback when a string is not UTF-8.
func marshal(v value) []byte {
	strs := v.strs()
	for _, s := range strs {
		if !utf8.ValidString(*s) {
			_, x := v.header()
			*x = true
			for _, s := range strs {
				*s = base64.StdEncoding.EncodeToString([]byte(*s))
			}
			break
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // "<" as itself, not \u003c: shorter and readable
	if err := enc.Encode(v); err != nil {
		// Only ints, bools, valid strings and slices of them.
		panic(fmt.Sprintf("etcdstore: encoding %T: %v", v, err))
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// errNewerValue: the value was written by a newer tenure.
var errNewerValue = errors.New("value encoding is newer than this tenure's")

// unmarshal decodes data into v strictly: unknown fields, trailing data
// and newer versions are errors.
func unmarshal(data []byte, v value) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && len(bytes.TrimSpace(data[dec.InputOffset():])) > 0 {
		err = errors.New("trailing data after the value")
	}
	if err != nil {
		// A newer version may have fields this one does not know; say so
		// rather than name the field.
		var hdr struct {
			V int `json:"v"`
		}
		if json.Unmarshal(data, &hdr) == nil && hdr.V > valueVersion {
			return fmt.Errorf("%w (version %d, this tenure reads up to %d)", errNewerValue, hdr.V, valueVersion)
		}
		return err
	}
	ver, x := v.header()
	if *ver > valueVersion {
		return fmt.Errorf("%w (version %d, this tenure reads up to %d)", errNewerValue, *ver, valueVersion)
	}
	if *ver < 0 {
		return fmt.Errorf("negative version %d", *ver)
	}
	if *x {
		for _, s := range v.strs() {
			b, err := base64.StdEncoding.DecodeString(*s)
			if err != nil {
				return fmt.Errorf("a base64 string: %w", err)
			}
			*s = string(b)
		}
	}
	return nil
}

// decodeValue decodes the value of a key that parse took apart.
func decodeValue(pk parsedKey, data []byte) (coordinator.Record, error) {
	switch pk.kind {
	case kindGroup:
		v, ok := decodeGroupFast(data)
		if !ok {
			v = groupValue{}
			if err := unmarshal(data, &v); err != nil {
				return nil, err
			}
		}
		r := &coordinator.GroupRecord{
			Group: pk.group, Type: coordinator.GroupType(v.Type), Epoch: v.Epoch, ProtocolType: v.ProtocolType,
			Protocol: v.Protocol, Leader: v.Leader, State: v.State, Deleted: v.Deleted,
		}
		if v.Targets != nil {
			r.Targets = make([]coordinator.MemberTarget, len(v.Targets))
			for i, t := range v.Targets {
				tps, err := unruns(t.Target, joinTP, false)
				if err != nil {
					return nil, err
				}
				r.Targets[i] = coordinator.MemberTarget{MemberID: t.Member, Target: tps}
			}
		}
		return r, nil
	case kindMember:
		v, ok := decodeMemberFast(data)
		if !ok {
			v = memberValue{}
			if err := unmarshal(data, &v); err != nil {
				return nil, err
			}
		}
		r := &coordinator.MemberRecord{
			Group: pk.group, MemberID: pk.name, InstanceID: v.InstanceID, ClientID: v.ClientID,
			ClientHost: v.ClientHost, RackID: v.RackID, SessionTimeout: time.Duration(v.SessionTimeout),
			RebalanceTimeout: time.Duration(v.RebalanceTimeout), Topics: v.Topics, TopicRegex: v.TopicRegex,
			ServerAssignor: v.ServerAssignor, Drained: v.Drained, RemoveWhenDrained: v.RemoveDrained,
		}
		if v.Protocols != nil {
			r.Protocols = make([]coordinator.Protocol, len(v.Protocols))
			for i, p := range v.Protocols {
				r.Protocols[i] = coordinator.Protocol{Name: p.Name, Metadata: p.Metadata}
			}
		}
		return r, nil
	case kindAssignment:
		if r, ok := decodeAssignmentFast(pk.group, pk.name, data); ok {
			return r, nil
		}
		var v assignmentValue
		if err := unmarshal(data, &v); err != nil {
			return nil, err
		}
		return assignmentFromValue(pk.group, pk.name, &v)
	case kindOffset:
		r, _, err := decodeOffset(pk.group, pk.name, pk.partition, data)
		return r, err
	case kindTopic:
		var v topicValue
		if err := unmarshal(data, &v); err != nil {
			return nil, err
		}
		r := &coordinator.TopicRecord{Name: pk.name, Partitions: v.Partitions}
		if v.ID != "" {
			id, err := base64.RawURLEncoding.DecodeString(v.ID)
			if err != nil || len(id) != len(r.ID) {
				return nil, fmt.Errorf("topic ID %q is not 16 bytes in base64url", v.ID)
			}
			copy(r.ID[:], id)
		}
		return r, nil
	case kindLog:
		return decodeGeneration(pk, data)
	}
	return nil, errBadKey
}

// assignmentFromValue is the record the general decoder's value of
// member's assignment in group stands for.
func assignmentFromValue(group, member string, v *assignmentValue) (*coordinator.AssignmentRecord, error) {
	r := &coordinator.AssignmentRecord{
		Group: group, MemberID: member, MemberEpoch: v.MemberEpoch, PrevEpoch: v.PrevEpoch, Raw: v.Raw,
	}
	var err error
	if r.Owned, err = unruns(v.Owned, func(t string, p int32, k int64) coordinator.OwnedPartition {
		return coordinator.OwnedPartition{Topic: t, Partition: p, Token: epoch.Token(k)}
	}, true); err != nil {
		return nil, err
	}
	if r.Provisional, err = unruns(v.Provisional, func(t string, p int32, k int64) coordinator.ProvisionalPartition {
		return coordinator.ProvisionalPartition{Topic: t, Partition: p, Floor: epoch.Token(k)}
	}, true); err != nil {
		return nil, err
	}
	if r.Pending, err = unruns(v.Pending, joinTP, false); err != nil {
		return nil, err
	}
	if r.Revoking, err = unruns(v.Revoking, joinTP, false); err != nil {
		return nil, err
	}
	if r.Target, err = unruns(v.Target, joinTP, false); err != nil {
		return nil, err
	}
	return r, nil
}

func joinTP(t string, p int32, _ int64) coordinator.TopicPartition {
	return coordinator.TopicPartition{Topic: t, Partition: p}
}

// decodeOffset decodes an offset value of group's topic and partition,
// with its fold order (0: none).
func decodeOffset(group, topic string, partition int32, data []byte) (*coordinator.OffsetRecord, int64, error) {
	v, ok := decodeOffsetFast(data)
	if !ok {
		v = offsetValue{} // what the fast path read before it gave up
		if err := unmarshal(data, &v); err != nil {
			return nil, 0, err
		}
	}
	if v.Folded < 0 {
		return nil, 0, fmt.Errorf("negative fold order %d", v.Folded)
	}
	return &coordinator.OffsetRecord{
		Group: group, Topic: topic, Partition: partition, Offset: v.Offset, LeaderEpoch: v.LeaderEpoch,
		Metadata: v.Metadata, Token: epoch.Token(v.Token), MemberID: v.MemberID,
	}, v.Folded, nil
}

// checkOffset reports what decodeOffset would about data, without
// decoding it when it has the shape tenure writes: the error, the fold
// order, and the record only when the general decoder had to read it
// (nil otherwise, left to decodeOffset once the value turns out to be
// needed).
func checkOffset(group, topic string, partition int32, data []byte) (*coordinator.OffsetRecord, int64, error) {
	v, ok := scanOffset(data, false)
	if !ok {
		return decodeOffset(group, topic, partition, data)
	}
	if v.Folded < 0 {
		return nil, 0, fmt.Errorf("negative fold order %d", v.Folded)
	}
	return nil, v.Folded, nil
}

func decodeGeneration(pk parsedKey, data []byte) (*coordinator.GenerationRecord, error) {
	var v generationValue
	if err := unmarshal(data, &v); err != nil {
		return nil, err
	}
	r := &coordinator.GenerationRecord{
		Group: pk.group, Epoch: pk.partition, Type: coordinator.GroupType(v.Type), Time: fromUnixNano(v.Time),
		Reason: v.Reason, Members: v.Members, Joined: v.Joined, Left: v.Left, MinMoves: v.MinMoves,
		Assigned: v.Assigned, AfterFailover: fromUnixNano(v.AfterFailover), Trim: v.Trim,
		Handoff: coordinator.Handoff{
			Done: v.Done, Completed: fromUnixNano(v.Completed), Granted: v.Granted, Superseded: v.Superseded,
			Unowned: time.Duration(v.Unowned), MaxUnowned: time.Duration(v.MaxUnowned),
		},
	}
	if v.Moves != nil {
		r.Moves = make([]coordinator.Move, len(v.Moves))
		for i, m := range v.Moves {
			r.Moves[i] = coordinator.Move{Topic: m.Topic, Partition: m.Partition, From: m.From,
				OldToken: epoch.Token(m.OldToken), To: m.To, NewToken: epoch.Token(m.NewToken)}
		}
	}
	return r, nil
}
