package member

import (
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/epoch"
)

// String renders the machine's state on a few stable lines, for golden
// tests and debugging. Instants are shown as durations since Start.
func (m *Machine) String() string {
	var b strings.Builder
	b.WriteString("member ")
	b.WriteString(m.memberID)
	b.WriteString(" epoch ")
	b.WriteString(strconv.Itoa(int(m.memberEpoch)))
	switch {
	case !m.started:
		b.WriteString(" not-started")
	case m.left:
		b.WriteString(" left")
	case m.leaving:
		b.WriteString(" leaving")
	case m.memberEpoch == 0:
		b.WriteString(" joining")
	default:
		b.WriteString(" member")
	}
	if m.interval > 0 {
		b.WriteString(" interval ")
		b.WriteString(m.interval.String())
	}
	b.WriteByte('\n')
	if !m.lastAck.IsZero() {
		b.WriteString("acked-sent ")
		b.WriteString(m.since(m.lastAck))
		b.WriteString(" deadline ")
		b.WriteString(m.since(m.window.Deadline(m.lastAck)))
		b.WriteString(" expiry ")
		b.WriteString(m.since(m.lastAck.Add(m.expireAfter)))
		b.WriteByte('\n')
	}
	if !m.revokeAt.IsZero() {
		b.WriteString("revoke-deadline ")
		b.WriteString(m.since(m.revokeAt))
		b.WriteByte('\n')
	}
	if m.inflight != nil {
		b.WriteString("in-flight epoch ")
		b.WriteString(strconv.Itoa(int(m.inflight.MemberEpoch)))
		b.WriteString(" sent ")
		b.WriteString(m.since(m.inflightSent))
		b.WriteByte('\n')
	} else if m.hbWanted && !m.left {
		b.WriteString("next-heartbeat ")
		b.WriteString(m.since(m.hbAt))
		b.WriteByte('\n')
	}
	for _, c := range m.order {
		st := c.own.State()
		if st == epoch.Unowned {
			continue
		}
		b.WriteString(c.topic)
		b.WriteByte('/')
		b.WriteString(strconv.Itoa(int(c.key.partition)))
		b.WriteByte(' ')
		b.WriteString(st.String())
		b.WriteString(" token ")
		b.WriteString(c.token().String())
		if c.revoked {
			b.WriteString(" revoked")
		}
		if c.active {
			b.WriteString(" active")
		}
		b.WriteByte('\n')
	}
	for _, list := range []struct {
		label  string
		grants []grant
	}{{"deferred ", m.deferred}, {"unresolved ", m.unresolved}} {
		for _, g := range list.grants {
			b.WriteString(list.label)
			b.WriteString(m.topicName(g.id))
			b.WriteByte('/')
			b.WriteString(strconv.Itoa(int(g.partition)))
			b.WriteString(" token ")
			b.WriteString(g.token.String())
			b.WriteByte('\n')
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// since renders t as a duration since Start.
func (m *Machine) since(t time.Time) string {
	return t.Sub(m.start).String()
}

// topicName names a topic ID, or renders the ID in hex.
func (m *Machine) topicName(id [16]byte) string {
	if n, ok := m.names[id]; ok {
		return n
	}
	return hex.EncodeToString(id[:])
}

// describeHeartbeat renders a heartbeat request on one line, naming topic
// IDs where names resolves them. Nil and empty lists differ: a nil field
// is "unchanged", an empty one is "none".
func describeHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest, names func([16]byte) string) string {
	var b strings.Builder
	b.WriteString("heartbeat epoch=")
	b.WriteString(strconv.Itoa(int(req.MemberEpoch)))
	b.WriteString(" member=")
	b.WriteString(req.MemberID)
	if req.InstanceID != nil {
		b.WriteString(" instance=")
		b.WriteString(*req.InstanceID)
	}
	if req.RackID != nil {
		b.WriteString(" rack=")
		b.WriteString(*req.RackID)
	}
	if req.RebalanceTimeoutMillis != -1 {
		b.WriteString(" rebalance=")
		b.WriteString(strconv.Itoa(int(req.RebalanceTimeoutMillis)))
		b.WriteString("ms")
	}
	if req.SubscribedTopicNames != nil {
		b.WriteString(" subscribe=[")
		b.WriteString(strings.Join(req.SubscribedTopicNames, " "))
		b.WriteByte(']')
	}
	if req.ServerAssignor != nil {
		b.WriteString(" assignor=")
		b.WriteString(*req.ServerAssignor)
	}
	if req.Topics != nil {
		b.WriteString(" owned=[")
		for i, t := range req.Topics {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(names(t.TopicID))
			b.WriteByte(':')
			b.WriteString(describePartitions(t.Partitions))
		}
		b.WriteByte(']')
	}
	return b.String()
}

// describePartitions renders sorted partitions with ranges: "0-3,5".
func describePartitions(ps []int32) string {
	var b strings.Builder
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
			j++
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(ps[i])))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(int(ps[j])))
		}
		i = j + 1
	}
	return b.String()
}
