package coordinator

import "unsafe"

// TopicStrings counts the topic names a KIP-848 group holds in its
// members' subscriptions and assignments, and how many of them share the
// bytes of its sole resolved topic's name.
func TopicStrings(g *Group) (shared, total int) {
	c := &g.consumer
	sole := unsafe.StringData(c.sole)
	count := func(s string) {
		total++
		if unsafe.StringData(s) == sole {
			shared++
		}
	}
	for _, m := range c.members {
		for _, t := range m.topics {
			count(t)
		}
		for _, p := range m.assigned {
			count(p.Topic)
		}
		for _, p := range m.target {
			count(p.Topic)
		}
	}
	return shared, total
}
