package coordinator

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP-848 and offset commands for the datadriven tests (testdata/consumer_*
// and testdata/offsets_*). Members are named by labels; a label is also the
// member ID a v1 client sends, unless a v0 join let the coordinator name it.
// After every command the invariants of checkConsumerInvariants are
// checked.
//
//	hb member=L [epoch=N] [version=1] [gen-id] [topics=(t,u)|topics=null]
//	   [regex=RE] [owned=(t/0-3,u/1)|owned=null] [sync] [instance=I]
//	   [rebalance=30s|unset] [assignor=NAME] [rack=R] [client=C]
//	    Sends a ConsumerGroupHeartbeat. epoch defaults to the epoch last
//	    returned to L (0 if none: a join). On a join, owned defaults to the
//	    empty list and rebalance to 30s; otherwise both default to "unchanged"
//	    (null, -1). sync reports as owned what L last received (a client that
//	    applied its assignment and released what it lost). gen-id sends an
//	    empty member ID (v0: the coordinator names the member).
//	leave member=L [static] [instance=I]
//	    Sends epoch -1 (or -2 with static, which needs instance=).
//	round [members=(L,...)] [except=(L,...)] [quiet]
//	    Every member (label order) sends a sync heartbeat; quiet drops the
//	    output of heartbeats that changed nothing.
//	run d=DURATION [members=(L,...)] [except=(L,...)]
//	    Advances time in heartbeat intervals; at each step due timers fire,
//	    then the members send sync heartbeats. Prints only what changed.
//	commit [member=L] [epoch=N] offsets=(t/3=100,...) [version=9]
//	       [metadata=S] [metadata-size=N]
//	    Sends an OffsetCommit; without member, an admin commit (empty member
//	    ID, generation -1). epoch defaults to L's last epoch.
//	fetch [member=L] [epoch=N] [topics=(t/0-3,...)] [version=9]
//	    Calls FetchOffsets (without member: an admin fetch; without topics:
//	    all offsets).
//	offset-delete topics=(t/0-1,...)
//	    Sends an OffsetDelete.
//	delete-group
//	    Calls Delete.
//	describe
//	    Prints DescribeConsumer.
//	drain member=L [remove]
//	    Calls Drain (an admin drain; remove: remove once empty).
//	undrain member=L
//	    Calls Undrain.
func init() {
	testCommands["hb"] = cmdHeartbeat
	testCommands["leave"] = cmdLeave
	testCommands["commit"] = cmdCommit
	testCommands["fetch"] = cmdFetch
	testCommands["offset-delete"] = cmdOffsetDelete
	testCommands["delete-group"] = cmdDeleteGroup
	testCommands["round"] = cmdRound
	testCommands["run"] = cmdRun
	testCommands["drain"] = func(e *testEnv, a *testArgs) string {
		return e.admin(func(ref any) Input {
			return Drain{Ref: ref, MemberID: a.str("member", ""), Remove: a.has("remove")}
		})
	}
	testCommands["undrain"] = func(e *testEnv, a *testArgs) string {
		return e.admin(func(ref any) Input { return Undrain{Ref: ref, MemberID: a.str("member", "")} })
	}
	testCommands["describe"] = func(e *testEnv, a *testArgs) string {
		return renderDescribe(e.g.DescribeConsumer())
	}
	responseRenderers[68] = renderHeartbeatResponse
	responseRenderers[8] = renderCommitResponse
	responseRenderers[47] = renderOffsetDeleteResponse
	responseRenderers[69] = func(r kmsg.Response) string {
		var b strings.Builder
		for _, g := range r.(*kmsg.ConsumerGroupDescribeResponse).Groups {
			b.WriteString(renderDescribe(g))
		}
		return b.String()
	}
	responseRenderers[9] = func(r kmsg.Response) string {
		var b strings.Builder
		for _, g := range r.(*kmsg.OffsetFetchResponse).Groups {
			b.WriteString(renderFetch(g))
		}
		return b.String()
	}
}

// consumerClient is what the scripts know of one member.
type consumerClient struct {
	id    string
	epoch int32
	held  []TopicPartition
}

var (
	consumerClients = map[*testEnv]map[string]*consumerClient{}
	// renderEnv resolves topic IDs while a command renders replies.
	renderEnv *testEnv
)

func (e *testEnv) client(label string) *consumerClient {
	cs := consumerClients[e]
	if cs == nil {
		cs = make(map[string]*consumerClient)
		consumerClients[e] = cs
	}
	c := cs[label]
	if c == nil {
		c = &consumerClient{id: label}
		cs[label] = c
	}
	return c
}

// parseTPs parses t/0-3 and t/5 into partitions.
func parseTPs(t *testing.T, specs []string) []TopicPartition {
	var out []TopicPartition
	for _, s := range specs {
		if s == "" {
			continue
		}
		topic, rng, ok := strings.Cut(s, "/")
		if !ok {
			t.Fatalf("bad partition %q", s)
		}
		lo, hi, isRange := strings.Cut(rng, "-")
		if strings.HasPrefix(rng, "-") {
			lo, hi, isRange = rng, "", false
		}
		a, err := strconv.Atoi(lo)
		if err != nil {
			t.Fatalf("bad partition %q", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				t.Fatalf("bad partition %q", s)
			}
		}
		for p := a; p <= b; p++ {
			out = append(out, TopicPartition{topic, int32(p)})
		}
	}
	return out
}

// topicIDOf returns the ID of a test topic, or of the deleted topic of the
// name (an unknown name gets an ID no topic has).
func (e *testEnv) topicIDOf(name string) TopicID {
	if id, _, ok := e.topics.Lookup(name); ok {
		return id
	}
	if id, ok := e.deletedIDs[name]; ok {
		return id
	}
	var id TopicID
	id[0] = 0xee
	copy(id[1:], name)
	return id
}

func (e *testEnv) heartbeatTopics(tps []TopicPartition) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for _, tp := range tps {
		id := e.topicIDOf(tp.Topic)
		i := slices.IndexFunc(out, func(t kmsg.ConsumerGroupHeartbeatRequestTopic) bool { return t.TopicID == id })
		if i < 0 {
			out = append(out, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: id})
			i = len(out) - 1
		}
		out[i].Partitions = append(out[i].Partitions, tp.Partition)
	}
	return out
}

func cmdHeartbeat(e *testEnv, a *testArgs) string {
	label := a.str("member", "")
	cl := e.client(label)
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = int16(a.int("version", 1))
	req.Group = e.g.Name()
	req.MemberID = cl.id
	if a.has("gen-id") {
		req.MemberID = ""
	}
	req.MemberEpoch = int32(a.int("epoch", int(cl.epoch)))
	join := req.MemberEpoch == 0
	if a.has("topics") {
		if ts := a.strs("topics"); !(len(ts) == 1 && ts[0] == "null") {
			req.SubscribedTopicNames = []string{}
			for _, t := range ts {
				if t != "" {
					req.SubscribedTopicNames = append(req.SubscribedTopicNames, t)
				}
			}
		}
	}
	if a.has("regex") {
		re := a.str("regex", "")
		req.SubscribedTopicRegex = &re
	}
	switch {
	case a.has("sync"):
		req.Topics = e.heartbeatTopics(cl.held)
	case a.has("owned"):
		if os := a.strs("owned"); !(len(os) == 1 && os[0] == "null") {
			req.Topics = e.heartbeatTopics(parseTPs(a.t, os))
		}
	case join:
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	if a.has("instance") {
		inst := a.str("instance", "")
		req.InstanceID = &inst
	}
	if a.has("rack") {
		rack := a.str("rack", "")
		req.RackID = &rack
	}
	if a.has("assignor") {
		as := a.str("assignor", "")
		req.ServerAssignor = &as
	}
	switch r := a.str("rebalance", ""); {
	case r == "unset":
	case r != "":
		d, err := time.ParseDuration(r)
		if err != nil {
			a.t.Fatalf("rebalance=%q: %v", r, err)
		}
		req.RebalanceTimeoutMillis = int32(d / time.Millisecond)
	case join:
		req.RebalanceTimeoutMillis = 30000
	}
	out := e.stepConsumer(label, a.str("client", "client"), req)
	return out
}

// roundLabels returns the members a round heartbeats: members=(...), or
// every label the script used that is in the group, minus except=(...).
func (e *testEnv) roundLabels(a *testArgs) []string {
	labels := a.strs("members")
	if len(labels) == 0 {
		for label, cl := range consumerClients[e] {
			if _, ok := e.g.consumer.members[cl.id]; ok {
				labels = append(labels, label)
			}
		}
	}
	except := a.strs("except")
	labels = slices.DeleteFunc(labels, func(l string) bool { return slices.Contains(except, l) })
	slices.Sort(labels)
	return labels
}

// syncBeat sends L's heartbeat reporting what it holds.
func (e *testEnv) syncBeat(label string) string {
	cl := e.client(label)
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group = e.g.Name()
	req.MemberID = cl.id
	req.MemberEpoch = cl.epoch
	req.Topics = e.heartbeatTopics(cl.held)
	return e.stepConsumer(label, "client", req)
}

// interesting drops the output of a heartbeat that changed nothing.
func interesting(out string) bool {
	return strings.Contains(out, "persist:") || strings.Contains(out, "event:") ||
		strings.Contains(out, "assignment=") || strings.Contains(out, "error=")
}

// round [members=(L,...)] [except=(L,...)] [quiet]
//
//	Every member (label order) sends a sync heartbeat; quiet drops the
//	output of heartbeats that changed nothing.
func cmdRound(e *testEnv, a *testArgs) string {
	quiet := a.has("quiet")
	var b strings.Builder
	for _, l := range e.roundLabels(a) {
		if out := e.syncBeat(l); !quiet || interesting(out) {
			b.WriteString(out)
		}
	}
	if b.Len() == 0 {
		return "ok"
	}
	return b.String()
}

// run d=DURATION [members=(L,...)] [except=(L,...)]
//
//	Advances time in heartbeat intervals; at each step the members send
//	sync heartbeats, then due timers fire. Prints only what changed.
func cmdRun(e *testEnv, a *testArgs) string {
	end := e.now.Add(a.dur("d", 0))
	step := e.cfg.ConsumerHeartbeatInterval
	labels := e.roundLabels(a)
	var b strings.Builder
	for e.now.Before(end) {
		d := min(step, end.Sub(e.now))
		if out := e.advance(d); out != "ok" {
			b.WriteString(out)
		}
		for _, l := range labels {
			if _, ok := e.g.consumer.members[e.client(l).id]; !ok {
				continue
			}
			if out := e.syncBeat(l); interesting(out) {
				fmt.Fprintf(&b, "at %s:\n%s", rel(e.now), out)
			}
		}
	}
	if b.Len() == 0 {
		return "ok"
	}
	return b.String()
}

func cmdLeave(e *testEnv, a *testArgs) string {
	label := a.str("member", "")
	cl := e.client(label)
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group = e.g.Name()
	req.MemberID = cl.id
	req.MemberEpoch = -1
	if a.has("static") {
		req.MemberEpoch = -2
	}
	if a.has("instance") {
		inst := a.str("instance", "")
		req.InstanceID = &inst
	}
	return e.stepConsumer(label, "client", req)
}

// stepConsumer steps a heartbeat and learns what the client would from its
// reply.
func (e *testEnv) stepConsumer(label, clientID string, req *kmsg.ConsumerGroupHeartbeatRequest) string {
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	renderEnv = e
	e.g.Step(e.now, Request{Ref: label, Msg: req, Resp: resp, ClientID: clientID, ClientHost: "/127.0.0.1"})
	out := e.drain()
	cl := e.client(label)
	if resp.ErrorCode == 0 {
		if resp.MemberID != nil {
			cl.id = *resp.MemberID
		}
		cl.epoch = resp.MemberEpoch
		if resp.MemberEpoch < 0 {
			cl.epoch, cl.held = 0, nil
		}
		if resp.Assignment != nil {
			cl.held = e.assignmentTPs(resp.Assignment)
		}
	}
	checkConsumerInvariants(e.t, e.g)
	return out
}

func (e *testEnv) assignmentTPs(a *kmsg.ConsumerGroupHeartbeatResponseAssignment) []TopicPartition {
	var tps []TopicPartition
	for _, t := range a.Topics {
		name, ok := e.topics.Name(t.TopicID)
		if !ok {
			name = fmt.Sprintf("%x", t.TopicID)
		}
		for _, p := range t.Partitions {
			tps = append(tps, TopicPartition{name, p})
		}
	}
	return sortTPs(tps)
}

func renderHeartbeatResponse(r kmsg.Response) string {
	resp := r.(*kmsg.ConsumerGroupHeartbeatResponse)
	if resp.ErrorCode != 0 {
		s := "error=" + kerr.ErrorForCode(resp.ErrorCode).(*kerr.Error).Message
		if resp.ErrorMessage != nil {
			s += " (" + *resp.ErrorMessage + ")"
		}
		return s
	}
	var b strings.Builder
	if resp.MemberID != nil && renderEnv != nil {
		// Name generated member IDs; labels are the IDs otherwise.
		if cs := consumerClients[renderEnv]; cs != nil {
			if _, ok := cs[*resp.MemberID]; !ok {
				b.WriteString("member=" + *resp.MemberID + " ")
			}
		}
	}
	fmt.Fprintf(&b, "epoch=%d", resp.MemberEpoch)
	if renderEnv != nil && resp.HeartbeatIntervalMillis != int32(renderEnv.cfg.ConsumerHeartbeatInterval/time.Millisecond) {
		fmt.Fprintf(&b, " interval=%dms", resp.HeartbeatIntervalMillis)
	}
	if resp.Assignment != nil {
		b.WriteString(" assignment=" + renderTPList(renderEnv.assignmentTPs(resp.Assignment)))
	}
	return b.String()
}

func cmdCommit(e *testEnv, a *testArgs) string {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = int16(a.int("version", 9))
	req.Group = e.g.Name()
	req.Generation = -1
	ref := "admin"
	if a.has("member") {
		label := a.str("member", "")
		cl := e.client(label)
		req.MemberID = cl.id
		req.Generation = cl.epoch
		ref = label
	}
	req.Generation = int32(a.int("epoch", int(req.Generation)))
	var meta *string
	if a.has("metadata") {
		s := a.str("metadata", "")
		meta = &s
	}
	if n := a.int("metadata-size", -1); n >= 0 {
		s := strings.Repeat("x", n)
		meta = &s
	}
	for _, spec := range a.strs("offsets") {
		tpSpec, off, ok := strings.Cut(spec, "=")
		if !ok {
			a.t.Fatalf("bad offset %q", spec)
		}
		o, err := strconv.ParseInt(off, 10, 64)
		if err != nil {
			a.t.Fatalf("bad offset %q", spec)
		}
		for _, tp := range parseTPs(a.t, []string{tpSpec}) {
			i := slices.IndexFunc(req.Topics, func(t kmsg.OffsetCommitRequestTopic) bool { return t.Topic == tp.Topic })
			if i < 0 {
				rt := kmsg.NewOffsetCommitRequestTopic()
				rt.Topic = tp.Topic
				rt.TopicID = e.topicIDOf(tp.Topic)
				req.Topics = append(req.Topics, rt)
				i = len(req.Topics) - 1
			}
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition = tp.Partition
			rp.Offset = o
			rp.Metadata = meta
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		}
	}
	renderEnv = e
	out := e.step(ref, "client", req)
	checkConsumerInvariants(e.t, e.g)
	return out
}

func renderCommitResponse(r kmsg.Response) string {
	resp := r.(*kmsg.OffsetCommitResponse)
	var parts []string
	for _, t := range resp.Topics {
		name := t.Topic
		if resp.Version >= 10 && renderEnv != nil {
			if n, ok := renderEnv.topics.Name(t.TopicID); ok {
				name = n
			} else {
				name = "?"
			}
		}
		for _, p := range t.Partitions {
			s := "ok"
			if p.ErrorCode != 0 {
				s = kerr.ErrorForCode(p.ErrorCode).(*kerr.Error).Message
			}
			parts = append(parts, fmt.Sprintf("%s[%d] %s", name, p.Partition, s))
		}
	}
	return strings.Join(parts, ", ")
}

func cmdFetch(e *testEnv, a *testArgs) string {
	version := int16(a.int("version", 9))
	req := kmsg.NewOffsetFetchRequestGroup()
	req.Group = e.g.Name()
	if a.has("member") {
		cl := e.client(a.str("member", ""))
		req.MemberID = &cl.id
		req.MemberEpoch = cl.epoch
	}
	req.MemberEpoch = int32(a.int("epoch", int(req.MemberEpoch)))
	if a.has("topics") {
		req.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
		for _, tp := range parseTPs(a.t, a.strs("topics")) {
			i := slices.IndexFunc(req.Topics, func(t kmsg.OffsetFetchRequestGroupTopic) bool { return t.Topic == tp.Topic })
			if i < 0 {
				req.Topics = append(req.Topics, kmsg.OffsetFetchRequestGroupTopic{Topic: tp.Topic, TopicID: e.topicIDOf(tp.Topic)})
				i = len(req.Topics) - 1
			}
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, tp.Partition)
		}
	}
	renderEnv = e
	return renderFetch(e.g.FetchOffsets(e.now, version, req, true))
}

func renderFetch(g kmsg.OffsetFetchResponseGroup) string {
	if g.ErrorCode != 0 {
		return "error=" + kerr.ErrorForCode(g.ErrorCode).(*kerr.Error).Message + "\n"
	}
	var parts []string
	for _, t := range g.Topics {
		name := t.Topic
		if name == "" && renderEnv != nil {
			name, _ = renderEnv.topics.Name(t.TopicID)
		}
		for _, p := range t.Partitions {
			s := fmt.Sprintf("%s[%d]=%d", name, p.Partition, p.Offset)
			if p.Metadata != nil && *p.Metadata != "" {
				s += fmt.Sprintf(" %q", *p.Metadata)
			}
			if p.ErrorCode != 0 {
				s += " " + kerr.ErrorForCode(p.ErrorCode).(*kerr.Error).Message
			}
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return "no offsets\n"
	}
	return strings.Join(parts, ", ") + "\n"
}

func cmdOffsetDelete(e *testEnv, a *testArgs) string {
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = e.g.Name()
	for _, tp := range parseTPs(a.t, a.strs("topics")) {
		i := slices.IndexFunc(req.Topics, func(t kmsg.OffsetDeleteRequestTopic) bool { return t.Topic == tp.Topic })
		if i < 0 {
			req.Topics = append(req.Topics, kmsg.OffsetDeleteRequestTopic{Topic: tp.Topic})
			i = len(req.Topics) - 1
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, kmsg.OffsetDeleteRequestTopicPartition{Partition: tp.Partition})
	}
	return e.step("offset-delete", "admin", req)
}

func renderOffsetDeleteResponse(r kmsg.Response) string {
	resp := r.(*kmsg.OffsetDeleteResponse)
	if resp.ErrorCode != 0 {
		return "error=" + kerr.ErrorForCode(resp.ErrorCode).(*kerr.Error).Message
	}
	var parts []string
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			s := "ok"
			if p.ErrorCode != 0 {
				s = kerr.ErrorForCode(p.ErrorCode).(*kerr.Error).Message
			}
			parts = append(parts, fmt.Sprintf("%s[%d] %s", t.Topic, p.Partition, s))
		}
	}
	return strings.Join(parts, ", ")
}

func cmdDeleteGroup(e *testEnv, a *testArgs) string {
	err := stepAdmin(e.t, e.g, e.now, func(ref any) Input { return DeleteGroup{Ref: ref} })
	s := "ok"
	if err != nil {
		s = "error=" + err.(*kerr.Error).Message
	}
	return s + "\n" + e.drain()
}

func renderDescribe(d kmsg.ConsumerGroupDescribeResponseGroup) string {
	var b strings.Builder
	if d.ErrorCode != 0 {
		fmt.Fprintf(&b, "%s: error=%s\n", d.Group, kerr.ErrorForCode(d.ErrorCode).(*kerr.Error).Message)
		return b.String()
	}
	fmt.Fprintf(&b, "%s: state=%s epoch=%d assignment-epoch=%d assignor=%s\n", d.Group, d.State, d.Epoch, d.AssignmentEpoch, d.AssignorName)
	for _, m := range d.Members {
		fmt.Fprintf(&b, "  %s epoch=%d client=%s host=%s", m.MemberID, m.MemberEpoch, m.ClientID, m.ClientHost)
		if m.InstanceID != nil {
			b.WriteString(" instance=" + *m.InstanceID)
		}
		if m.RackID != nil {
			b.WriteString(" rack=" + *m.RackID)
		}
		b.WriteString(" topics=" + strings.Join(m.SubscribedTopics, ","))
		if m.SubscribedTopicRegex != nil {
			fmt.Fprintf(&b, " regex=%q", *m.SubscribedTopicRegex)
		}
		fmt.Fprintf(&b, " assignment=%s target=%s\n", renderCGAssignment(m.Assignment), renderCGAssignment(m.TargetAssignment))
	}
	return b.String()
}

func renderCGAssignment(a kmsg.Assignment) string {
	var tps []TopicPartition
	for _, t := range a.TopicPartitions {
		for _, p := range t.Partitions {
			tps = append(tps, TopicPartition{t.Topic, p})
		}
	}
	return renderTPList(sortTPs(tps))
}

// checkConsumerInvariants checks that the coordinator's owners and its
// members' partitions describe the same single-owner world, and that the
// target index agrees with the targets (targetIndexError).
func checkConsumerInvariants(t testing.TB, g *Group) {
	t.Helper()
	if err := consumerInvariantError(g); err != nil {
		t.Fatal(err)
	}
}

func consumerInvariantError(g *Group) error {
	if g.typ != Consumer {
		return nil
	}
	c := &g.consumer
	seen := make(map[TopicPartition]string)
	for id, m := range c.members {
		if m.id != id {
			return fmt.Errorf("member %s stored under %s", m.id, id)
		}
		if (len(m.revoking) > 0) != (m.state == memberUnrevoked) && m.epoch != staticLeftEpoch {
			return fmt.Errorf("member %s in state %s with revoking %v", id, m.state, m.revoking)
		}
		for _, set := range [][]OwnedPartition{m.assigned, m.revoking} {
			if !slices.IsSortedFunc(set, compareOwned) {
				return fmt.Errorf("member %s: unsorted partitions %v", id, set)
			}
			for _, p := range set {
				tp := TopicPartition{p.Topic, p.Partition}
				if other, dup := seen[tp]; dup {
					return fmt.Errorf("%s[%d] held by both %s and %s", tp.Topic, tp.Partition, other, id)
				}
				seen[tp] = id
				o, ok := g.owners.owner(tp)
				if !ok || o.member != id || o.token != p.Token {
					return fmt.Errorf("member %s holds %s[%d]@%v but owners say %+v (%v)", id, tp.Topic, tp.Partition, p.Token, o, ok)
				}
				if p.Token > tokenOf(g.epoch) || !p.Token.Valid() {
					return fmt.Errorf("member %s holds %s[%d] at token %v, group epoch %d", id, tp.Topic, tp.Partition, p.Token, g.epoch)
				}
			}
		}
		if m.epoch > g.epoch {
			return fmt.Errorf("member %s at epoch %d above the group's %d", id, m.epoch, g.epoch)
		}
	}
	if g.owners.owned() != len(seen) {
		return fmt.Errorf("owners has %d partitions, members hold %d", g.owners.owned(), len(seen))
	}
	n := 0
	for _, m := range c.members {
		if c.isReconciled(m) {
			n++
		}
	}
	if n != c.reconciled {
		return fmt.Errorf("reconciled count %d, actual %d", c.reconciled, n)
	}
	if !c.nextDeadline.IsZero() {
		for _, m := range c.members {
			if g.deadlineOf(m).Before(c.nextDeadline) || (!m.revokeDeadline.IsZero() && m.revokeDeadline.Before(c.nextDeadline)) {
				return fmt.Errorf("member %s has a deadline before the cached next deadline", m.id)
			}
		}
	} else if len(c.members) > 0 {
		return fmt.Errorf("members but no next deadline")
	}
	if c.joinsWaiting() && len(c.members) == 0 {
		return fmt.Errorf("joins wait for a bump in a group without members")
	}
	return targetIndexError(c)
}
