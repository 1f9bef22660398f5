package assignor

// ByName returns the assignor for a protocol name: "uniform" (Uniform),
// "range" (Range) or "rendezvous" (Rendezvous with DefaultEpsilon). Names
// are case-sensitive, as in Kafka. The second result is false for any other
// name.
func ByName(name string) (Assignor, bool) {
	switch name {
	case UniformName:
		return Uniform(), true
	case RangeName:
		return Range(), true
	case RendezvousName:
		return Rendezvous(DefaultEpsilon), true
	}
	return nil, false
}

// Names lists the names ByName knows, default first.
func Names() []string { return []string{UniformName, RangeName, RendezvousName} }
