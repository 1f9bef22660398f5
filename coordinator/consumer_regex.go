package coordinator

import "regexp"

// TopicLister is implemented by a Topics resolver that can list the topic
// names it knows (StaticTopics does). KIP-848 regex subscriptions
// (ConsumerGroupHeartbeat v1 SubscribedTopicRegex) are resolved against
// that list; with a resolver that cannot list, a heartbeat carrying a
// non-empty regex is answered INVALID_REQUEST.
type TopicLister interface {
	// Names returns every topic name, in any order.
	Names() []string
}

// CompileTopicRegex compiles a KIP-848 subscription regex as the
// coordinator resolves it: like Kafka, the pattern must match the whole
// topic name. Go's RE2 syntax is the one Kafka's RE2J accepts. Everything
// that matches topics against a subscription (the server's ACL check, the
// CLI's state) compiles it here, so they agree with the group.
func CompileTopicRegex(pattern string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + pattern + ")$")
}
