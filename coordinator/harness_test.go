package coordinator

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/assignor"
	"github.com/tenure-dev/tenure/internal/ddtest"
)

// The datadriven tests in testdata/ script a group through requests and
// timer ticks and print everything the group asks its caller to do.
//
// Common commands (protocol commands are registered by classic_test.go and
// consumer_test.go; each documents its own):
//
//	new-group [name=g] [initial-delay=3s] [min-session=6s] [max-session=30m]
//	          [max-size=N] [session=10s] [heartbeat=2s] [assignor=uniform]
//	          [join-coalesce=0s] [conn-grace=3s] [takeover-grace=0s]
//	          [grants]
//	          [topic=NAME:PARTITIONS ...]
//	    Starts a fresh group at t=0 (resets the test clock); grants turns
//	    on Config.IssueGrants, and each reply's grants print as a
//	    "grants to <member>:" line after it; conn-grace is
//	    Config.ConnLossGrace.
//	conn-closed member=LABEL
//	    Calls ConnectionClosed for the member (connloss_test.go).
//	reissue-grants
//	    Calls ReissueGrants (a signing key rotated).
//	add-topic name=NAME partitions=N
//	    Creates a topic and tells the group (TopicsChanged).
//	advance d=DURATION
//	    Moves the clock forward and, if the group's NextTick is due, ticks
//	    it (repeatedly, at each due instant in order) and prints the output.
//	tick
//	    Ticks the group at the current time and prints the output.
//	state
//	    Prints Group.String().
//	restart
//	    Replaces the group by one restored (Restore) from the records it
//	    persisted, at the current time, as a coordinator restart or
//	    fail-over does; a deleted group comes back from its tombstone, as
//	    a group re-created under its name does. Prints the new group's
//	    Ready.
//
// After every Ready the harness also checks that the persisted records
// hold the group's exact state and that Restore rebuilds it
// (restoreChecker), so every script doubles as a restart test.
//
// Every command that steps the group prints the Ready it produced:
// "persist:", "reply to <ref>:", "event:" lines and "next-tick: t=...",
// then advances the group. Leftover arguments fail the test.
func TestDatadriven(t *testing.T) {
	ddtest.Walk(t, func(t *testing.T, path string) {
		e := newTestEnv(t)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return e.run(t, d)
		})
	})
}

// run runs one datadriven command on e and returns what it printed.
func (e *testEnv) run(t *testing.T, d *datadriven.TestData) string {
	cmd, ok := testCommands[d.Cmd]
	if !ok {
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	a := newTestArgs(t, d)
	out := cmd(e, a)
	a.done()
	return out
}

// testCommands holds the datadriven commands; protocol test files add theirs
// in init functions.
var testCommands = map[string]func(e *testEnv, a *testArgs) string{
	"new-group": func(e *testEnv, a *testArgs) string {
		cfg := DefaultConfig()
		name := a.str("name", "g")
		cfg.InitialRebalanceDelay = a.dur("initial-delay", cfg.InitialRebalanceDelay)
		cfg.MinSessionTimeout = a.dur("min-session", cfg.MinSessionTimeout)
		cfg.MaxSessionTimeout = a.dur("max-session", cfg.MaxSessionTimeout)
		cfg.MaxGroupSize = a.int("max-size", cfg.MaxGroupSize)
		// The scripts pin their own timing rather than follow
		// DefaultConfig, so a change of defaults does not rewrite them.
		cfg.ConsumerSessionTimeout = a.dur("session", 10*time.Second)
		cfg.ConsumerHeartbeatInterval = a.dur("heartbeat", 2*time.Second)
		cfg.ConsumerJoinCoalesce = a.dur("join-coalesce", 0)
		cfg.ConnLossGrace = a.dur("conn-grace", 3*time.Second)
		cfg.TakeoverGrace = a.dur("takeover-grace", 0)
		cfg.IssueGrants = a.has("grants")
		if n := a.str("assignor", ""); n != "" {
			i := slices.IndexFunc(cfg.Assignors, func(x assignor.Assignor) bool { return x.Name() == n })
			if i < 0 {
				a.t.Fatalf("unknown assignor %q", n)
			}
			cfg.Assignors[0], cfg.Assignors[i] = cfg.Assignors[i], cfg.Assignors[0]
		}
		e.topics = NewStaticTopics()
		for _, spec := range a.strs("topic") {
			var tname string
			var parts int32
			if _, err := fmt.Sscanf(strings.Replace(spec, ":", " ", 1), "%s %d", &tname, &parts); err != nil {
				a.t.Fatalf("bad topic %q: %v", spec, err)
			}
			e.addTopic(tname, parts)
		}
		cfg.Topics = e.topics
		if err := cfg.Validate(); err != nil {
			return "error: " + err.Error()
		}
		e.cfg = cfg
		e.now = testEpoch
		e.g = NewGroup(name, &e.cfg, rand.New(rand.NewPCG(1, 2)))
		e.g.SetGroupTargets(!e.targetsOff)
		e.restore = newRestoreChecker()
		return "ok"
	},
	"add-topic": func(e *testEnv, a *testArgs) string {
		e.addTopic(a.str("name", ""), int32(a.int("partitions", 0)))
		e.g.Step(e.now, TopicsChanged{})
		return e.drain()
	},
	"advance": func(e *testEnv, a *testArgs) string {
		return e.advance(a.dur("d", 0))
	},
	"tick": func(e *testEnv, a *testArgs) string {
		e.g.Step(e.now, Tick{})
		return e.drain()
	},
	"reissue-grants": func(e *testEnv, a *testArgs) string {
		e.g.Step(e.now, ReissueGrants{})
		return "ok"
	},
	"state": func(e *testEnv, a *testArgs) string {
		return e.g.String()
	},
	"restart": func(e *testEnv, a *testArgs) string {
		g, err := Restore(e.g.Name(), &e.cfg, rand.New(rand.NewPCG(5, 6)), e.now, e.restore.set.Group(e.g.Name()))
		if err != nil {
			return "error: " + err.Error()
		}
		e.g = g
		e.g.SetGroupTargets(!e.targetsOff)
		return fmt.Sprintf("restored at epoch %d\n", g.Epoch()) + e.drain()
	},
}

// testEpoch is t=0 of every script. It carries no monotonic reading, like
// the simulator's clock.
var testEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type testEnv struct {
	t      *testing.T
	cfg    Config
	topics *StaticTopics
	g      *Group
	now    time.Time
	// nextTopicID makes topic IDs deterministic: 00..01, 00..02, ...
	nextTopicID byte
	// deletedIDs are the IDs of deleted topics, by name: a client that
	// still holds a partition of one reports it under that ID.
	deletedIDs map[string]TopicID
	// restore checks, after every Ready, that the group could be restored
	// from what it persisted.
	restore *restoreChecker
	// targetsOff runs the group with SetGroupTargets(false)
	// (TestDatadrivenGroupTargetsOff).
	targetsOff bool
}

func newTestEnv(t *testing.T) *testEnv {
	return &testEnv{t: t, now: testEpoch}
}

func (e *testEnv) addTopic(name string, parts int32) {
	e.nextTopicID++
	var id TopicID
	id[15] = e.nextTopicID
	e.topics.Add(name, id, parts)
}

// step hands one request to the group; ref names it in the output.
func (e *testEnv) step(ref string, clientID string, msg kmsg.Request) string {
	e.g.Step(e.now, Request{Ref: ref, Msg: msg, ClientID: clientID, ClientHost: "/127.0.0.1"})
	return e.drain()
}

// advance moves the clock by d, ticking the group at every due instant.
func (e *testEnv) advance(d time.Duration) string {
	end := e.now.Add(d)
	var out strings.Builder
	for {
		next := e.g.Ready().NextTick
		if next.IsZero() || next.After(end) {
			break
		}
		if next.After(e.now) {
			e.now = next
		}
		e.g.Step(e.now, Tick{})
		if s := e.drain(); s != "" && s != "next-tick: none\n" {
			fmt.Fprintf(&out, "at %s:\n%s", rel(e.now), s)
		}
		if !e.g.Ready().NextTick.After(e.now) && !e.g.Ready().NextTick.IsZero() {
			e.t.Fatalf("group asks to be ticked at %s again after a tick at %s", rel(e.g.Ready().NextTick), rel(e.now))
		}
	}
	e.now = end
	if out.Len() == 0 {
		return "ok"
	}
	return out.String()
}

// answer is the Ref of an admin input stepped by stepAdmin.
type answer struct{}

// stepAdmin steps the admin input mk makes at now and returns the group's
// answer, which it finds in Ready without retiring it.
func stepAdmin(t testing.TB, g *Group, now time.Time, mk func(ref any) Input) error {
	t.Helper()
	a := new(answer)
	g.Step(now, mk(a))
	for _, r := range g.Ready().Replies {
		if r.Ref == a {
			if r.Msg != nil {
				t.Fatalf("the answer to an admin input carries a response: %v", r.Msg)
			}
			return r.Err
		}
	}
	t.Fatalf("no answer to %T in Ready", mk(a))
	return nil
}

// admin steps an admin input and renders the group's answer: the error
// alone, or the Ready it left.
func (e *testEnv) admin(mk func(ref any) Input) string {
	err := stepAdmin(e.t, e.g, e.now, mk)
	out := e.drain()
	if err != nil {
		return "error: " + err.Error()
	}
	return out
}

// drain renders and advances the group's Ready.
func (e *testEnv) drain() string {
	rd := e.g.Ready()
	var b strings.Builder
	for _, r := range rd.Persist {
		b.WriteString("persist: " + renderRecord(r) + "\n")
	}
	for _, r := range rd.Replies {
		if r.Msg == nil {
			continue // an admin input's answer (stepAdmin)
		}
		fmt.Fprintf(&b, "reply to %v: %s\n", r.Ref, renderResponse(r.Msg))
		if r.Grants != nil {
			fmt.Fprintf(&b, "grants to %s: %s\n", r.Grants.Member, renderGrants(r.Grants.Partitions))
		}
	}
	for _, ev := range rd.Events {
		b.WriteString("event: " + renderEvent(ev) + "\n")
	}
	if rd.NextTick.IsZero() {
		b.WriteString("next-tick: none\n")
	} else {
		b.WriteString("next-tick: " + rel(rd.NextTick) + "\n")
	}
	if e.targetsOff {
		for _, r := range rd.Persist {
			if gr, ok := r.(*GroupRecord); ok && gr.Targets != nil {
				e.t.Fatalf("a group with SetGroupTargets(false) wrote targets: %s", renderRecord(r))
			}
		}
	}
	e.g.Advance(rd)
	if e.restore != nil {
		e.restore.apply(e.t, rd)
		e.restore.check(e.t, e.g, e.now)
	}
	return b.String()
}

// renderGrants renders granted partitions as topic[partition]@token,
// with the topic ID's last byte: t[0]@5/id1.
func renderGrants(ps []GrantedPartition) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = fmt.Sprintf("%s[%d]@%v/id%d", p.Topic, p.Partition, p.Token, p.TopicID[15])
	}
	return strings.Join(parts, " ")
}

// rel renders an instant as the offset from testEpoch.
func rel(t time.Time) string { return "t=" + t.Sub(testEpoch).String() }

// responseRenderers render responses by API key; protocol test files add
// theirs in init functions.
var responseRenderers = map[int16]func(kmsg.Response) string{}

func renderResponse(r kmsg.Response) string {
	if f, ok := responseRenderers[r.Key()]; ok {
		return f(r)
	}
	return fmt.Sprintf("%T", r)
}

func renderRecord(r Record) string {
	switch r := r.(type) {
	case *GroupRecord:
		s := fmt.Sprintf("group %s type=%s epoch=%d", r.Group, r.Type, r.Epoch)
		if r.ProtocolType != "" {
			s += " protocol-type=" + r.ProtocolType
		}
		if r.Protocol != "" {
			s += " protocol=" + r.Protocol
		}
		if r.Leader != "" {
			s += " leader=" + r.Leader
		}
		if r.State != "" {
			s += " state=" + r.State
		}
		if r.Deleted {
			s += " deleted"
		}
		for i, t := range r.Targets {
			if i == 0 {
				s += " targets="
			} else {
				s += ","
			}
			s += t.MemberID + ":" + renderTPList(t.Target)
		}
		return s
	case *MemberRecord:
		if r.Deleted {
			return "member " + r.MemberID + " deleted"
		}
		s := fmt.Sprintf("member %s", r.MemberID)
		if r.InstanceID != "" {
			s += " instance=" + r.InstanceID
		}
		s += fmt.Sprintf(" session=%v rebalance=%v", r.SessionTimeout, r.RebalanceTimeout)
		if len(r.Topics) > 0 {
			s += " topics=" + strings.Join(r.Topics, ",")
		}
		return s
	case *AssignmentRecord:
		s := fmt.Sprintf("assignment %s epoch=%d owned=%s", r.MemberID, r.MemberEpoch, renderOwnedTPs(r.Owned))
		if len(r.Pending) > 0 {
			s += " pending=" + renderTPList(r.Pending)
		}
		if len(r.Revoking) > 0 {
			s += " revoking=" + renderTPList(r.Revoking)
		}
		if len(r.Target) > 0 {
			s += " target=" + renderTPList(r.Target)
		}
		return s
	case *OffsetRecord:
		if r.Deleted {
			return fmt.Sprintf("offset %s[%d] deleted", r.Topic, r.Partition)
		}
		by := r.MemberID
		if by == "" {
			by = "admin"
		}
		return fmt.Sprintf("offset %s[%d]=%d token=%v by %s", r.Topic, r.Partition, r.Offset, r.Token, by)
	case *GenerationRecord:
		return renderGeneration(r)
	}
	return fmt.Sprintf("%T", r)
}

// renderGeneration renders a generation log entry on one line: its
// moves as partition:from->to@token, "-" for nobody.
func renderGeneration(r *GenerationRecord) string {
	s := fmt.Sprintf("generation %s epoch=%d %s reason=%s members=%d", r.Group, r.Epoch, rel(r.Time), r.Reason, r.Members)
	if len(r.Joined) > 0 {
		s += " joined=" + strings.Join(r.Joined, ",")
	}
	if len(r.Left) > 0 {
		s += " left=" + strings.Join(r.Left, ",")
	}
	if !r.Assigned {
		return s + " moves=pending"
	}
	who := func(m string) string {
		if m == "" {
			return "-"
		}
		return m
	}
	mv := make([]string, len(r.Moves))
	for i, m := range r.Moves {
		mv[i] = fmt.Sprintf("%s[%d]:%s@%v->%s@%v", m.Topic, m.Partition, who(m.From), m.OldToken, who(m.To), m.NewToken)
	}
	s += fmt.Sprintf(" moves={%s} min=%d", strings.Join(mv, " "), r.MinMoves)
	h := r.Handoff
	if !h.Done {
		return s + " handoff=open"
	}
	s += fmt.Sprintf(" handoff=done@%s granted=%d superseded=%d unowned=%v max=%v", rel(h.Completed), h.Granted, h.Superseded, h.Unowned, h.MaxUnowned)
	if !r.AfterFailover.IsZero() {
		s += " after-restore=" + rel(r.AfterFailover)
	}
	return s
}

func renderEvent(ev Event) string {
	s := fmt.Sprintf("%s epoch=%d members=%d", ev.Kind, ev.Epoch, ev.Members)
	if ev.MemberID != "" {
		s += " member=" + ev.MemberID
	}
	if ev.Kind == EventRebalanceCompleted {
		s += fmt.Sprintf(" moves=%d", ev.Moves)
	}
	if ev.Kind == EventCommitRejected || ev.Kind == EventPartitionHandedOff {
		s += fmt.Sprintf(" partition=%s[%d]", ev.Partition.Topic, ev.Partition.Partition)
	}
	if ev.Kind == EventPartitionHandedOff {
		s += fmt.Sprintf(" unowned=%v", ev.Duration)
	}
	if ev.Reason != "" {
		s += " reason=" + ev.Reason
	}
	return s
}

// testArgs reads a datadriven command's arguments and fails the test on
// any argument the command did not read.
type testArgs struct {
	t    *testing.T
	d    *datadriven.TestData
	used map[string]bool
}

func newTestArgs(t *testing.T, d *datadriven.TestData) *testArgs {
	return &testArgs{t: t, d: d, used: make(map[string]bool)}
}

func (a *testArgs) done() {
	for _, arg := range a.d.CmdArgs {
		if !a.used[arg.Key] {
			a.d.Fatalf(a.t, "unused argument %q", arg.Key)
		}
	}
}

func (a *testArgs) has(key string) bool {
	a.used[key] = true
	return a.d.HasArg(key)
}

func (a *testArgs) str(key, def string) string {
	a.used[key] = true
	arg, ok := a.d.Arg(key)
	if !ok {
		return def
	}
	return arg.SingleVal(a.t)
}

// strs returns all values of key (key=(a,b) or repeated key=a key=b).
func (a *testArgs) strs(key string) []string {
	a.used[key] = true
	var out []string
	for _, arg := range a.d.CmdArgs {
		if arg.Key == key {
			out = append(out, arg.Vals...)
		}
	}
	return out
}

func (a *testArgs) int(key string, def int) int {
	s := a.str(key, "")
	if s == "" {
		return def
	}
	var v int
	if _, err := fmt.Sscan(s, &v); err != nil {
		a.t.Fatalf("%s=%q: %v", key, s, err)
	}
	return v
}

func (a *testArgs) dur(key string, def time.Duration) time.Duration {
	s := a.str(key, "")
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		a.t.Fatalf("%s=%q: %v", key, s, err)
	}
	return d
}
