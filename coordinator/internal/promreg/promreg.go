// Package promreg registers a component's Prometheus collectors as one
// set: all or none, and unregistered together when the component closes,
// so that a registry outlives components that come and go (an etcd store
// per leadership term, an HA node per start).
package promreg

import "github.com/prometheus/client_golang/prometheus"

// Set is collectors registered together.
type Set struct {
	reg prometheus.Registerer
	cs  []prometheus.Collector
}

// Register registers cs with reg, or none of them if one fails.
func Register(reg prometheus.Registerer, cs ...prometheus.Collector) (*Set, error) {
	s := &Set{reg: reg}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			s.Unregister()
			return nil, err
		}
		s.cs = append(s.cs, c)
	}
	return s, nil
}

// Unregister unregisters the set's collectors; it may be called more than
// once, and on a nil Set.
func (s *Set) Unregister() {
	if s == nil {
		return
	}
	for _, c := range s.cs {
		s.reg.Unregister(c)
	}
	s.cs = nil
}
