package coordinator

import (
	"strings"
)

// Topic deletion commands for the datadriven scripts
// (testdata/topics_deleted*.txt):
//
//	delete-topic name=NAME... [silent]
//	    Removes the topics from the resolver and, unless silent, tells the
//	    group (TopicsDeleted) and prints its Ready. A client that still
//	    holds a partition of a deleted topic goes on reporting it under the
//	    deleted topic's ID, until a topic of the name is created again.
//	forget-unknown
//	    Prints UnknownTopics and passes them to TopicsDeleted, as the
//	    server does with a group it has just restored.
func init() {
	testCommands["delete-topic"] = func(e *testEnv, a *testArgs) string {
		names := a.strs("name")
		if len(names) == 0 {
			a.t.Fatal("delete-topic needs name=")
		}
		for _, n := range names {
			id, _, ok := e.topics.Lookup(n)
			if !ok {
				a.t.Fatalf("delete-topic: no topic %q", n)
			}
			if e.deletedIDs == nil {
				e.deletedIDs = make(map[string]TopicID)
			}
			e.deletedIDs[n] = id
			e.topics.Remove(n)
		}
		if a.has("silent") {
			return "ok"
		}
		renderEnv = e
		e.g.Step(e.now, TopicsDeleted{Names: names})
		out := e.drain()
		checkConsumerInvariants(e.t, e.g)
		return out
	}
	testCommands["forget-unknown"] = func(e *testEnv, a *testArgs) string {
		unknown := e.g.UnknownTopics()
		out := "unknown: " + strings.Join(unknown, ",") + "\n"
		e.g.Step(e.now, TopicsDeleted{Names: unknown})
		out += e.drain()
		checkConsumerInvariants(e.t, e.g)
		return out
	}
}
