package coordinator

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Classic protocol commands for the datadriven scripts (testdata/classic_*.txt).
//
// Members are named by labels (m1, m2, ...). A label that has no member ID
// yet joins with an empty one; the ID the group hands out (in a
// MEMBER_ID_REQUIRED reply, or in the member record of a join that is
// parked) is remembered, and every output prints known member IDs as their
// labels. The label is also the client ID, unless client= says otherwise.
//
//	join member=LABEL|(L1,L2,...) [instance=ID] [protocols=(NAME,...)]
//	     [type=consumer] [meta=TEXT] [session=10s] [rebalance=60s]
//	     [version=9] [client=ID] [new] [id=RAW]
//	    Sends a JoinGroup per label (in order, printing each one's Ready).
//	    protocols defaults to (range); meta is every protocol's metadata
//	    (default: the empty string); protocols=none sends no protocol.
//	    id sends a raw member ID instead of the label's. new joins with an
//	    empty member ID even if the label has one (a restarted process);
//	    the label then names the new member and its previous ID prints as
//	    LABEL'. The label keeps the instance ID unless the join is refused.
//	sync member=LABEL [generation=N] [assign=(L:TOPIC/P-Q+TOPIC/P,...)]
//	     [raw=(L:HEX,...)] [version=5] [protocol=NAME] [protocol-type=TYPE]
//	     [id=RAW]
//	    Sends a SyncGroup; generation defaults to the group's current one.
//	    assign encodes a ConsumerMemberAssignment per member ("L:" is an
//	    explicit zero-length assignment); raw sends the given bytes.
//	heartbeat member=LABEL|(L1,...) [generation=N] [version=4] [no-instance]
//	          [id=RAW]
//	    Sends a Heartbeat per label, with the instance ID the label joined
//	    with unless no-instance.
//	leave-group members=(L|@INSTANCE|L@INSTANCE,...) [version=5]
//	    Sends one LeaveGroup naming members by member ID, instance ID or
//	    both (version < 3 takes exactly one member ID).
//	commit-offsets member=LABEL [generation=N] [instance=ID] offsets=(TOPIC/P=OFFSET,...)
//	       [version=9]
//	    Sends an OffsetCommit; member=admin sends no member ID and
//	    generation -1 unless generation= is given.
//	commit-check member=LABEL [generation=N] [instance=ID] partitions=(TOPIC/P,...)
//	    Prints classicCommitMember's decision and, if it accepts, the token
//	    under which each partition could be committed (owners.commitToken).
//	describe-group
//	    Prints DescribeClassic.
//
// Every response is encoded and decoded at its version before it is
// printed, so a field the version does not carry does not show.
func init() {
	for name, cmd := range map[string]func(e *testEnv, a *testArgs) string{
		"join":           classicCmdJoin,
		"sync":           classicCmdSync,
		"heartbeat":      classicCmdHeartbeat,
		"leave-group":    classicCmdLeave,
		"commit-offsets": classicCmdCommit,
		"commit-check":   classicCmdCommitCheck,
		"describe-group": classicCmdDescribe,
	} {
		testCommands[name] = cmd
	}
	// Every command prints member IDs as labels, and new-group forgets
	// the labels of the previous group.
	for name, cmd := range testCommands {
		testCommands[name] = func(e *testEnv, a *testArgs) string {
			if name == "new-group" {
				classicLabelsMu.Lock()
				delete(classicLabelsByEnv, e)
				classicLabelsMu.Unlock()
			}
			return classicLabelsOf(e).apply(cmd(e, a))
		}
	}
	responseRenderers[kmsg.JoinGroup.Int16()] = renderClassicJoin
	responseRenderers[kmsg.SyncGroup.Int16()] = renderClassicSync
	responseRenderers[kmsg.Heartbeat.Int16()] = renderClassicHeartbeat
	responseRenderers[kmsg.LeaveGroup.Int16()] = renderClassicLeave
}

// classicLabels maps the labels of a script to member IDs.
type classicLabels struct {
	ids      map[string]string // label -> member ID
	labels   map[string]string // member ID -> label
	instance map[string]string // label -> instance ID it joined with
	repl     *strings.Replacer
}

var (
	classicLabelsMu    sync.Mutex
	classicLabelsByEnv = map[*testEnv]*classicLabels{}
)

func classicLabelsOf(e *testEnv) *classicLabels {
	classicLabelsMu.Lock()
	defer classicLabelsMu.Unlock()
	l := classicLabelsByEnv[e]
	if l == nil {
		l = &classicLabels{ids: map[string]string{}, labels: map[string]string{}, instance: map[string]string{}}
		classicLabelsByEnv[e] = l
	}
	return l
}

func (l *classicLabels) set(label, id string) {
	if old, ok := l.ids[label]; ok && old != id {
		l.labels[old] = label + "'"
	}
	l.ids[label] = id
	l.labels[id] = label
	l.repl = nil
}

func (l *classicLabels) apply(s string) string {
	if len(l.labels) == 0 {
		return s
	}
	if l.repl == nil {
		ids := make([]string, 0, len(l.labels))
		for id := range l.labels {
			ids = append(ids, id)
		}
		// Longest first, so an ID is never replaced inside a longer one.
		slices.SortFunc(ids, func(a, b string) int { return len(b) - len(a) })
		var pairs []string
		for _, id := range ids {
			pairs = append(pairs, id, l.labels[id])
		}
		l.repl = strings.NewReplacer(pairs...)
	}
	return l.repl.Replace(s)
}

// id returns the member ID of label ("" if it has none).
func (l *classicLabels) id(label string) string { return l.ids[label] }

// learn takes the member IDs a step revealed to label: the ID in its
// JoinGroup reply, or that of a member record the step wrote for a member
// the script does not know yet.
func (l *classicLabels) learn(e *testEnv, label, ref string) {
	rd := e.g.Ready()
	for _, r := range rd.Replies {
		if jr, ok := r.Msg.(*kmsg.JoinGroupResponse); ok && r.Ref == ref && jr.MemberID != "" {
			l.set(label, jr.MemberID)
			return
		}
	}
	for _, r := range rd.Persist {
		if mr, ok := r.(*MemberRecord); ok && !mr.Deleted {
			if _, known := l.labels[mr.MemberID]; !known {
				l.set(label, mr.MemberID)
				return
			}
		}
	}
}

func classicCmdJoin(e *testEnv, a *testArgs) string {
	l := classicLabelsOf(e)
	labels := a.strs("member")
	instance := a.str("instance", "")
	protocols := a.strs("protocols")
	if len(protocols) == 0 {
		protocols = []string{"range"}
	} else if len(protocols) == 1 && protocols[0] == "none" {
		protocols = nil
	}
	rawID := a.str("id", "")
	typ := a.str("type", "consumer")
	meta := a.str("meta", "")
	session := a.dur("session", defaultTestSession)
	rebalance := a.dur("rebalance", defaultTestRebalance)
	version := int16(a.int("version", 9))
	client := a.str("client", "")
	fresh := a.has("new")
	var out strings.Builder
	for _, label := range labels {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version = version
		req.Group = e.g.Name()
		req.SessionTimeoutMillis = int32(session.Milliseconds())
		req.RebalanceTimeoutMillis = int32(rebalance.Milliseconds())
		if !fresh {
			req.MemberID = l.id(label)
		}
		if rawID != "" {
			req.MemberID = rawID
		}
		if instance != "" {
			req.InstanceID = kmsg.StringPtr(instance)
		}
		req.ProtocolType = typ
		for _, p := range protocols {
			req.Protocols = append(req.Protocols, kmsg.JoinGroupRequestProtocol{Name: p, Metadata: []byte(meta)})
		}
		cid := client
		if cid == "" {
			cid = label
		}
		ref := "join " + label
		e.g.Step(e.now, Request{Ref: ref, Msg: req, ClientID: cid, ClientHost: "/127.0.0.1"})
		if req.MemberID == "" {
			l.learn(e, label, ref)
		}
		if instance != "" && !classicJoinFailed(e, ref) {
			l.instance[label] = instance
		}
		if len(labels) > 1 {
			fmt.Fprintf(&out, "%s:\n", ref)
		}
		out.WriteString(e.drain())
	}
	return out.String()
}

// classicJoinFailed reports whether the JoinGroup ref was answered at once
// with an error other than MEMBER_ID_REQUIRED.
func classicJoinFailed(e *testEnv, ref string) bool {
	for _, r := range e.g.Ready().Replies {
		if jr, ok := r.Msg.(*kmsg.JoinGroupResponse); ok && r.Ref == ref {
			return jr.ErrorCode != 0 && jr.ErrorCode != kerr.MemberIDRequired.Code
		}
	}
	return false
}

func classicCmdSync(e *testEnv, a *testArgs) string {
	l := classicLabelsOf(e)
	label := a.str("member", "")
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = int16(a.int("version", 5))
	req.Group = e.g.Name()
	req.Generation = int32(a.int("generation", int(e.g.Epoch())))
	req.MemberID = l.id(label)
	if id := a.str("id", ""); id != "" {
		req.MemberID = id
	}
	if inst, ok := l.instance[label]; ok {
		req.InstanceID = kmsg.StringPtr(inst)
	}
	if a.has("protocol") {
		req.Protocol = kmsg.StringPtr(a.str("protocol", ""))
	}
	if a.has("protocol-type") {
		req.ProtocolType = kmsg.StringPtr(a.str("protocol-type", ""))
	}
	for _, spec := range a.strs("assign") {
		who, parts, _ := strings.Cut(spec, ":")
		var asg kmsg.ConsumerMemberAssignment
		for _, tspec := range strings.FieldsFunc(parts, func(r rune) bool { return r == '+' }) {
			asg.Topics = append(asg.Topics, classicParseTopic(a.t, tspec))
		}
		b := []byte{}
		if parts != "" {
			b = asg.AppendTo(nil)
		}
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: l.id(who), MemberAssignment: b})
	}
	for _, spec := range a.strs("raw") {
		who, h, _ := strings.Cut(spec, ":")
		b, err := hex.DecodeString(h)
		if err != nil {
			a.t.Fatalf("raw %q: %v", spec, err)
		}
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: l.id(who), MemberAssignment: b})
	}
	return e.step("sync "+label, label, req)
}

// classicParseTopic parses TOPIC/P-Q or TOPIC/P.
func classicParseTopic(t *testing.T, s string) kmsg.ConsumerMemberAssignmentTopic {
	topic, rng, ok := strings.Cut(s, "/")
	if !ok {
		t.Fatalf("bad partitions %q", s)
	}
	lo, hi, isRange := strings.Cut(rng, "-")
	from, err1 := strconv.Atoi(lo)
	to := from
	var err2 error
	if isRange {
		to, err2 = strconv.Atoi(hi)
	}
	if err1 != nil || err2 != nil || to < from {
		t.Fatalf("bad partitions %q", s)
	}
	at := kmsg.ConsumerMemberAssignmentTopic{Topic: topic}
	for p := from; p <= to; p++ {
		at.Partitions = append(at.Partitions, int32(p))
	}
	return at
}

func classicCmdHeartbeat(e *testEnv, a *testArgs) string {
	l := classicLabelsOf(e)
	labels := a.strs("member")
	gen := a.int("generation", -2)
	version := int16(a.int("version", 4))
	noInstance := a.has("no-instance")
	rawID := a.str("id", "")
	var out strings.Builder
	for _, label := range labels {
		req := kmsg.NewPtrHeartbeatRequest()
		req.Version = version
		req.Group = e.g.Name()
		req.Generation = e.g.Epoch()
		if gen != -2 {
			req.Generation = int32(gen)
		}
		req.MemberID = l.id(label)
		if rawID != "" {
			req.MemberID = rawID
		}
		if inst, ok := l.instance[label]; ok && !noInstance {
			req.InstanceID = kmsg.StringPtr(inst)
		}
		out.WriteString(e.step("heartbeat "+label, label, req))
	}
	return out.String()
}

func classicCmdLeave(e *testEnv, a *testArgs) string {
	l := classicLabelsOf(e)
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version = int16(a.int("version", 5))
	req.Group = e.g.Name()
	names := a.strs("members")
	for _, spec := range names {
		label, inst, hasInst := strings.Cut(spec, "@")
		m := kmsg.NewLeaveGroupRequestMember()
		if label != "" {
			m.MemberID = l.id(label)
		}
		if hasInst {
			m.InstanceID = kmsg.StringPtr(inst)
		}
		req.Members = append(req.Members, m)
	}
	if req.Version < 3 {
		if len(req.Members) != 1 {
			a.t.Fatalf("leave version %d takes one member", req.Version)
		}
		req.MemberID = req.Members[0].MemberID
		req.Members = nil
	}
	return e.step("leave "+strings.Join(names, ","), "admin", req)
}

// classicCommitRequest starts an OffsetCommit from the member labelled
// member= at the group's generation, or from no member for "admin",
// with the generation= and instance= overrides applied. It returns the
// label too.
func classicCommitRequest(e *testEnv, a *testArgs) (*kmsg.OffsetCommitRequest, string) {
	l := classicLabelsOf(e)
	label := a.str("member", "")
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = e.g.Name()
	if label != "admin" {
		req.MemberID = l.id(label)
		req.Generation = e.g.Epoch()
		if inst, ok := l.instance[label]; ok {
			req.InstanceID = kmsg.StringPtr(inst)
		}
	}
	req.Generation = int32(a.int("generation", int(req.Generation)))
	if inst := a.str("instance", ""); inst != "" {
		req.InstanceID = kmsg.StringPtr(inst)
	}
	return req, label
}

func classicCmdCommit(e *testEnv, a *testArgs) string {
	req, label := classicCommitRequest(e, a)
	req.Version = int16(a.int("version", 9))
	for _, spec := range a.strs("offsets") {
		tp, off, ok := strings.Cut(spec, "=")
		topic, part, ok2 := strings.Cut(tp, "/")
		p, err1 := strconv.Atoi(part)
		o, err2 := strconv.ParseInt(off, 10, 64)
		if !ok || !ok2 || err1 != nil || err2 != nil {
			a.t.Fatalf("bad offset %q", spec)
		}
		i := slices.IndexFunc(req.Topics, func(t kmsg.OffsetCommitRequestTopic) bool { return t.Topic == topic })
		if i < 0 {
			req.Topics = append(req.Topics, kmsg.NewOffsetCommitRequestTopic())
			i = len(req.Topics) - 1
			req.Topics[i].Topic = topic
			if id, _, ok := e.topics.Lookup(topic); ok {
				req.Topics[i].TopicID = id
			}
		}
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = int32(p), o
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	return e.step("commit "+label, label, req)
}

func classicCmdCommitCheck(e *testEnv, a *testArgs) string {
	l := classicLabelsOf(e)
	req, _ := classicCommitRequest(e, a)
	partitions := a.strs("partitions")
	member, code := e.g.classicCommitMember(req)
	var b strings.Builder
	if code != 0 {
		fmt.Fprintf(&b, "refused: %s\n", classicErrName(code))
		return b.String()
	}
	if member == "" {
		b.WriteString("accepted: admin commit\n")
		return b.String()
	}
	fmt.Fprintf(&b, "accepted: member %s generation %d\n", l.apply(member), req.Generation)
	for _, spec := range partitions {
		at := classicParseTopic(a.t, spec)
		for _, p := range at.Partitions {
			tok, ok := e.g.owners.commitToken(TopicPartition{at.Topic, p}, member)
			if ok {
				fmt.Fprintf(&b, "  %s[%d]: ok token=%v\n", at.Topic, p, tok)
			} else {
				fmt.Fprintf(&b, "  %s[%d]: not owner\n", at.Topic, p)
			}
		}
	}
	return b.String()
}

func classicCmdDescribe(e *testEnv, a *testArgs) string {
	d := e.g.DescribeClassic()
	var b strings.Builder
	fmt.Fprintf(&b, "group %s state=%s protocol-type=%q protocol=%q", d.Group, d.State, d.ProtocolType, d.Protocol)
	if d.ErrorCode != 0 {
		fmt.Fprintf(&b, " err=%s", classicErrName(d.ErrorCode))
	}
	b.WriteByte('\n')
	for _, m := range d.Members {
		fmt.Fprintf(&b, "  %s", m.MemberID)
		if m.InstanceID != nil {
			fmt.Fprintf(&b, " instance=%s", *m.InstanceID)
		}
		fmt.Fprintf(&b, " client=%s host=%s metadata=%q assignment=%s\n", m.ClientID, m.ClientHost, m.ProtocolMetadata, renderClassicAssignment(m.MemberAssignment))
	}
	return b.String()
}

const (
	defaultTestSession   = 10 * time.Second
	defaultTestRebalance = 60 * time.Second
)

func classicErrName(code int16) string {
	if code == 0 {
		return "ok"
	}
	if err, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return err.Message
	}
	return "error(" + strconv.Itoa(int(code)) + ")"
}

// classicRoundTrip encodes r at its version and decodes it again: what a client
// of that version receives.
func classicRoundTrip[T kmsg.Response](r, fresh T) T {
	fresh.SetVersion(r.GetVersion())
	if err := fresh.ReadFrom(r.AppendTo(nil)); err != nil {
		panic(fmt.Sprintf("%T v%d does not decode: %v", r, r.GetVersion(), err))
	}
	return fresh
}

func renderClassicJoin(r kmsg.Response) string {
	resp := classicRoundTrip(r.(*kmsg.JoinGroupResponse), new(kmsg.JoinGroupResponse))
	var b strings.Builder
	fmt.Fprintf(&b, "JoinGroup v%d: %s", resp.Version, classicErrName(resp.ErrorCode))
	if resp.ErrorCode != 0 {
		fmt.Fprintf(&b, " member=%q", resp.MemberID)
		return b.String()
	}
	fmt.Fprintf(&b, " gen=%d", resp.Generation)
	if resp.ProtocolType != nil {
		fmt.Fprintf(&b, " type=%s", *resp.ProtocolType)
	}
	if resp.Protocol != nil {
		fmt.Fprintf(&b, " protocol=%s", *resp.Protocol)
	}
	fmt.Fprintf(&b, " leader=%s member=%s", resp.LeaderID, resp.MemberID)
	if resp.SkipAssignment {
		b.WriteString(" skip-assignment")
	}
	if len(resp.Members) > 0 {
		b.WriteString(" members=[")
		for i, m := range resp.Members {
			writeClassicMember(&b, i, m.MemberID, m.InstanceID)
			if len(m.ProtocolMetadata) > 0 {
				fmt.Fprintf(&b, ":%q", m.ProtocolMetadata)
			}
		}
		b.WriteByte(']')
	}
	return b.String()
}

// writeClassicMember writes the i-th member of a response's list: its ID,
// with @instance for a static member, after a space unless it is the first.
func writeClassicMember(b *strings.Builder, i int, id string, instance *string) {
	if i > 0 {
		b.WriteByte(' ')
	}
	b.WriteString(id)
	if instance != nil {
		b.WriteString("@" + *instance)
	}
}

func renderClassicSync(r kmsg.Response) string {
	resp := classicRoundTrip(r.(*kmsg.SyncGroupResponse), new(kmsg.SyncGroupResponse))
	var b strings.Builder
	fmt.Fprintf(&b, "SyncGroup v%d: %s", resp.Version, classicErrName(resp.ErrorCode))
	if resp.ErrorCode != 0 {
		return b.String()
	}
	if resp.ProtocolType != nil {
		fmt.Fprintf(&b, " type=%s", *resp.ProtocolType)
	}
	if resp.Protocol != nil {
		fmt.Fprintf(&b, " protocol=%s", *resp.Protocol)
	}
	b.WriteString(" assignment=" + renderClassicAssignment(resp.MemberAssignment))
	return b.String()
}

// renderClassicAssignment renders assignment bytes as their partitions when they
// decode as a ConsumerMemberAssignment, else as hex.
func renderClassicAssignment(raw []byte) string {
	if len(raw) == 0 {
		return "<0 bytes>"
	}
	var a kmsg.ConsumerMemberAssignment
	if a.ReadFrom(raw) != nil {
		return "hex:" + hex.EncodeToString(raw)
	}
	return renderTPList(decodeConsumerAssignment(raw))
}

func renderClassicHeartbeat(r kmsg.Response) string {
	resp := classicRoundTrip(r.(*kmsg.HeartbeatResponse), new(kmsg.HeartbeatResponse))
	return fmt.Sprintf("Heartbeat v%d: %s", resp.Version, classicErrName(resp.ErrorCode))
}

func renderClassicLeave(r kmsg.Response) string {
	resp := classicRoundTrip(r.(*kmsg.LeaveGroupResponse), new(kmsg.LeaveGroupResponse))
	var b strings.Builder
	fmt.Fprintf(&b, "LeaveGroup v%d: %s", resp.Version, classicErrName(resp.ErrorCode))
	if len(resp.Members) > 0 {
		b.WriteString(" members=[")
		for i, m := range resp.Members {
			writeClassicMember(&b, i, m.MemberID, m.InstanceID)
			b.WriteString(":" + classicErrName(m.ErrorCode))
		}
		b.WriteByte(']')
	}
	return b.String()
}
