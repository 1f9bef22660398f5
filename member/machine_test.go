package member

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/internal/ddtest"
)

// TestMachine runs the scripts in testdata/. Each script drives one
// Machine on a virtual clock that starts at 0; every command that feeds
// the machine prints the Ready it produced (then calls Advance):
//
//	heartbeat #N epoch=E member=M [instance=I] [rack=R] [rebalance=Tms]
//	    [subscribe=[...]] [assignor=A] [owned=[topic:partitions ...]]
//	topic/p: From -> To token T (cause)
//	resolve [topic IDs]
//	left [err]
//	next-tick D
//
// A field that is absent from a heartbeat was sent as null ("unchanged");
// owned=[] is an empty list. Instants print as durations since 0.
//
// Commands (an argument the command does not know fails the test):
//
//	new-member [member=m1] [group=g] [topics=(work,...)] [instance=I]
//	    [rack=R] [assignor=A] [session=10s] [drift=0.01] [margin=100ms]
//	    [rebalance=5s] [request=500ms] [unknown-ids]
//	  Creates the machine. Every topic name has a fixed test ID; the
//	  subscribed topics' IDs are in MachineConfig.TopicIDs unless
//	  unknown-ids is given.
//	start
//	  Machine.Start at the current time.
//	advance D
//	  Moves the clock by D, then Machine.Tick.
//	tick
//	  Machine.Tick at the current time.
//	respond [epoch=E] [interval=D] [assign=(work:0-3,other:5)|none]
//	    [error=KAFKA_ERROR_NAME] [member-id=ID] [req=N]
//	  Answers the heartbeat in flight (or heartbeat #N, to deliver a
//	  response late or out of order). Without assign the response carries
//	  no assignment (null); assign=none is an empty one. epoch defaults
//	  to the machine's epoch, interval to 1s.
//	fail [req=N]
//	  HeartbeatFailed for the heartbeat in flight (or #N).
//	started topic:p [token=T]
//	released topic:p [token=T]
//	commit-rejected topic:p [token=T]
//	  The Started, Released and CommitRejected events; the token defaults
//	  to the claim's current one.
//	topic-ids topic...
//	  A TopicIDs event naming the listed topics.
//	subscribe [topics=(...)]
//	  Machine.Subscribe.
//	leave [temporary]
//	  Machine.Leave.
//	state
//	  Machine.String.
//	claims
//	  Machine.Claims.
func TestMachine(t *testing.T) {
	ddtest.Walk(t, func(t *testing.T, path string) {
		env := &machineEnv{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return env.handle(t, d)
		})
	})
}

// t0 is the virtual clock's origin.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

type machineEnv struct {
	m    *Machine
	now  time.Time
	sent []*kmsg.ConsumerGroupHeartbeatRequest
}

// testTopicID is the fixed ID of a test topic: its name's bytes, padded.
func testTopicID(name string) [16]byte {
	var id [16]byte
	copy(id[:], name)
	return id
}

func testTopicName(id [16]byte) string {
	return strings.TrimRight(string(id[:]), "\x00")
}

// args tracks which arguments a command used, so leftovers fail.
type args struct {
	t    *testing.T
	d    *datadriven.TestData
	used map[string]bool
}

func newArgs(t *testing.T, d *datadriven.TestData) *args {
	return &args{t: t, d: d, used: make(map[string]bool)}
}

func (a *args) has(k string) bool {
	a.used[k] = true
	return a.d.HasArg(k)
}

func (a *args) str(k, def string) string {
	a.used[k] = true
	arg, ok := a.d.Arg(k)
	if !ok {
		return def
	}
	if len(arg.Vals) != 1 {
		a.d.Fatalf(a.t, "%s wants one value", k)
	}
	return arg.Vals[0]
}

func (a *args) list(k string, def []string) []string {
	a.used[k] = true
	arg, ok := a.d.Arg(k)
	if !ok {
		return def
	}
	return arg.Vals
}

func (a *args) dur(k string, def time.Duration) time.Duration {
	s := a.str(k, "")
	if s == "" {
		return def
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		a.d.Fatalf(a.t, "%s: %v", k, err)
	}
	return v
}

func (a *args) int(k string, def int) int {
	s := a.str(k, "")
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		a.d.Fatalf(a.t, "%s: %v", k, err)
	}
	return v
}

func (a *args) float(k string, def float64) float64 {
	s := a.str(k, "")
	if s == "" {
		return def
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		a.d.Fatalf(a.t, "%s: %v", k, err)
	}
	return v
}

// done fails the test on arguments no one asked for.
func (a *args) done() {
	for _, arg := range a.d.CmdArgs {
		if !a.used[arg.Key] {
			a.d.Fatalf(a.t, "%s: unknown argument %q", a.d.Cmd, arg.Key)
		}
	}
}

func (e *machineEnv) handle(t *testing.T, d *datadriven.TestData) string {
	a := newArgs(t, d)
	defer a.done()
	if d.Cmd != "new-member" && e.m == nil {
		d.Fatalf(t, "%s before new-member", d.Cmd)
	}
	switch d.Cmd {
	case "new-member":
		topics := a.list("topics", []string{"work"})
		cfg := MachineConfig{
			Group:            a.str("group", "g"),
			MemberID:         a.str("member", "m1"),
			InstanceID:       a.str("instance", ""),
			RackID:           a.str("rack", ""),
			Topics:           topics,
			Assignor:         a.str("assignor", ""),
			SessionTimeout:   a.dur("session", 10*time.Second),
			MaxDrift:         a.float("drift", 0.01),
			SuspectMargin:    a.dur("margin", 100*time.Millisecond),
			RebalanceTimeout: a.dur("rebalance", 5*time.Second),
			RequestTimeout:   a.dur("request", 500*time.Millisecond),
		}
		if !a.has("unknown-ids") {
			cfg.TopicIDs = make(map[string][16]byte)
			for _, name := range topics {
				cfg.TopicIDs[name] = testTopicID(name)
			}
		}
		if err := cfg.Validate(); err != nil {
			return err.Error()
		}
		e.m, e.now, e.sent = NewMachine(cfg), t0, nil
		return "ok"
	case "start":
		e.m.Start(e.now)
	case "advance":
		if len(d.CmdArgs) != 1 || len(d.CmdArgs[0].Vals) != 0 {
			d.Fatalf(t, "advance wants one duration")
		}
		a.used[d.CmdArgs[0].Key] = true
		dur, err := time.ParseDuration(d.CmdArgs[0].Key)
		if err != nil {
			d.Fatalf(t, "advance: %v", err)
		}
		e.now = e.now.Add(dur)
		e.m.Tick(e.now)
	case "tick":
		e.m.Tick(e.now)
	case "respond":
		e.m.Step(e.now, e.response(t, d, a))
	case "fail":
		e.m.Step(e.now, HeartbeatFailed{Err: fmt.Errorf("test: timeout"), Req: e.req(t, d, a)})
	case "started", "released", "commit-rejected":
		topic, p, tok := e.claimArg(t, d, a)
		switch d.Cmd {
		case "started":
			e.m.Step(e.now, Started{Topic: topic, Partition: p, Token: tok})
		case "released":
			e.m.Step(e.now, Released{Topic: topic, Partition: p, Token: tok})
		default:
			e.m.Step(e.now, CommitRejected{Topic: topic, Partition: p, Token: tok, Err: kerr.StaleMemberEpoch})
		}
	case "topic-ids":
		ids := make(map[string][16]byte)
		for _, arg := range d.CmdArgs {
			a.used[arg.Key] = true
			ids[arg.Key] = testTopicID(arg.Key)
		}
		e.m.Step(e.now, TopicIDs{IDs: ids})
	case "subscribe":
		if err := e.m.Subscribe(e.now, a.list("topics", nil)); err != nil {
			return err.Error()
		}
	case "leave":
		e.m.Leave(e.now, a.has("temporary"))
	case "state":
		return e.m.String()
	case "claims":
		var b strings.Builder
		for _, c := range e.m.Claims() {
			fmt.Fprintf(&b, "%s/%d %s token %s\n", c.Topic, c.Partition, c.State, c.Token)
		}
		return strings.TrimSuffix(b.String(), "\n")
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	return e.ready()
}

// req returns heartbeat #N if req=N is given, else nil (the one in flight).
func (e *machineEnv) req(t *testing.T, d *datadriven.TestData, a *args) *kmsg.ConsumerGroupHeartbeatRequest {
	n := a.int("req", 0)
	if n == 0 {
		return nil
	}
	if n < 1 || n > len(e.sent) {
		d.Fatalf(t, "no heartbeat #%d", n)
	}
	return e.sent[n-1]
}

func (e *machineEnv) response(t *testing.T, d *datadriven.TestData, a *args) HeartbeatResponse {
	req := e.req(t, d, a)
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.MemberEpoch = int32(a.int("epoch", int(e.m.MemberEpoch())))
	resp.HeartbeatIntervalMillis = int32(a.dur("interval", time.Second).Milliseconds())
	id := a.str("member-id", e.m.MemberID())
	resp.MemberID = &id
	if name := a.str("error", ""); name != "" {
		code, ok := errorCodes()[name]
		if !ok {
			d.Fatalf(t, "unknown error %q", name)
		}
		resp.ErrorCode = code
	}
	if vals := a.list("assign", nil); vals != nil {
		resp.Assignment = &kmsg.ConsumerGroupHeartbeatResponseAssignment{}
		if !(len(vals) == 1 && vals[0] == "none") {
			byTopic := make(map[string][]int32)
			var order []string
			for _, v := range vals {
				topic, ps := parsePartitions(t, d, v)
				if _, ok := byTopic[topic]; !ok {
					order = append(order, topic)
				}
				byTopic[topic] = append(byTopic[topic], ps...)
			}
			for _, topic := range order {
				at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
				at.TopicID = testTopicID(topic)
				at.Partitions = byTopic[topic]
				resp.Assignment.Topics = append(resp.Assignment.Topics, at)
			}
		}
	}
	return HeartbeatResponse{Resp: resp, Req: req}
}

// parsePartitions parses "topic:0-3,5" (also "topic:-1" for a bad
// partition number).
func parsePartitions(t *testing.T, d *datadriven.TestData, s string) (string, []int32) {
	topic, spec, ok := strings.Cut(s, ":")
	if !ok {
		d.Fatalf(t, "want topic:partitions, got %q", s)
	}
	var ps []int32
	for _, r := range strings.Split(spec, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if lo == "" { // a negative number
			n, err := strconv.Atoi(r)
			if err != nil {
				d.Fatalf(t, "bad partition %q", r)
			}
			ps = append(ps, int32(n))
			continue
		}
		l, err := strconv.Atoi(lo)
		if err != nil {
			d.Fatalf(t, "bad partition %q", r)
		}
		h := l
		if isRange {
			if h, err = strconv.Atoi(hi); err != nil {
				d.Fatalf(t, "bad partition %q", r)
			}
		}
		for p := l; p <= h; p++ {
			ps = append(ps, int32(p))
		}
	}
	return topic, ps
}

// claimArg parses "topic:p" and token=T (default: the claim's token).
func (e *machineEnv) claimArg(t *testing.T, d *datadriven.TestData, a *args) (string, int32, epoch.Token) {
	var topic string
	var p int32 = -1
	for _, arg := range d.CmdArgs {
		if len(arg.Vals) == 0 && strings.Contains(arg.Key, ":") {
			a.used[arg.Key] = true
			name, ps := parsePartitions(t, d, arg.Key)
			if len(ps) != 1 {
				d.Fatalf(t, "want one partition")
			}
			topic, p = name, ps[0]
		}
	}
	if topic == "" {
		d.Fatalf(t, "%s wants topic:partition", d.Cmd)
	}
	tok := epoch.Token(a.int("token", -1))
	if tok == -1 {
		tok = epoch.None
		for _, c := range e.m.Claims() {
			if c.Topic == topic && c.Partition == p {
				tok = c.Token
			}
		}
	}
	return topic, p, tok
}

// ready renders and advances the machine's Ready.
func (e *machineEnv) ready() string {
	if !e.m.HasReady() {
		return "(nothing)"
	}
	rd := e.m.Ready()
	var b strings.Builder
	if rd.Heartbeat != nil {
		e.sent = append(e.sent, rd.Heartbeat)
		fmt.Fprintf(&b, "#%d %s\n", len(e.sent), describeHeartbeat(rd.Heartbeat, testTopicName))
	}
	for _, c := range rd.Changes {
		fmt.Fprintf(&b, "%s/%d: %s -> %s token %s (%s)\n", c.Topic, c.Partition, c.From, c.To, c.Token, c.Cause)
	}
	if len(rd.Resolve) > 0 {
		names := make([]string, len(rd.Resolve))
		for i, id := range rd.Resolve {
			names[i] = testTopicName(id)
		}
		fmt.Fprintf(&b, "resolve %v\n", names)
	}
	if rd.Left {
		b.WriteString("left")
		if rd.Err != nil {
			fmt.Fprintf(&b, " (%v)", rd.Err)
		}
		b.WriteByte('\n')
	}
	if rd.NextTick.IsZero() {
		b.WriteString("next-tick none")
	} else {
		fmt.Fprintf(&b, "next-tick %v", rd.NextTick.Sub(t0))
	}
	e.m.Advance(rd)
	return b.String()
}

// errorCodes maps Kafka error names (UNKNOWN_MEMBER_ID) to codes.
func errorCodes() map[string]int16 {
	codes := make(map[string]int16)
	for code := int16(-1); code < 200; code++ {
		var ke *kerr.Error
		if errors.As(kerr.ErrorForCode(code), &ke) && ke.Code == code {
			codes[ke.Message] = code
		}
	}
	return codes
}
