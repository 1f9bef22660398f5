package coordinator

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeClassic answers DescribeGroups for this group: its state,
// protocol type and members (sorted by member ID, with client ID, host and
// instance ID). As in Kafka, the chosen protocol and each member's metadata
// and assignment are given only when the group is Stable.
//
// A group that is not classic is answered as Kafka answers DescribeGroups
// for a consumer group: state Dead and GROUP_ID_NOT_FOUND (which the caller
// drops for versions before 6, as Kafka does for a missing group); a
// deleted group is Dead.
// The byte slices are shared with the group, which never modifies them;
// the caller must not modify them either.
func (g *Group) DescribeClassic() kmsg.DescribeGroupsResponseGroup {
	d := kmsg.NewDescribeGroupsResponseGroup()
	d.Group = g.name
	if g.deleted {
		d.State = "Dead"
		return d
	}
	if g.typ != Classic {
		d.State = "Dead"
		d.ErrorCode = kerr.GroupIDNotFound.Code
		d.ErrorMessage = kmsg.StringPtr("group " + g.name + " is not a classic group")
		return d
	}
	c := &g.classic
	d.State = c.phase.String()
	d.ProtocolType = c.protocolType
	stable := c.phase == classicStable
	if stable {
		d.Protocol = c.protocol
	}
	ms := c.sortedMembers()
	d.Members = make([]kmsg.DescribeGroupsResponseGroupMember, len(ms))
	for i, m := range ms {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID = m.id
		dm.ClientID = m.clientID
		dm.ClientHost = m.clientHost
		if m.static {
			dm.InstanceID = kmsg.StringPtr(m.instanceID)
		}
		if stable {
			dm.ProtocolMetadata = m.metadata(c.protocol)
			dm.MemberAssignment = m.assignment
		}
		d.Members[i] = dm
	}
	return d
}
