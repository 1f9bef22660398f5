package etcdstore

// PauseMirror ends m's watch and keeps it from starting again until
// resume is called, as an etcd out of reach would: the mirror falls
// behind the writes made meanwhile.
func PauseMirror(m *Mirror) (resume func()) {
	hold := make(chan struct{})
	m.mu.Lock()
	m.hold = hold
	stop := m.breakWatch
	m.mu.Unlock()
	stop()
	return func() {
		m.mu.Lock()
		m.hold = nil
		m.mu.Unlock()
		close(hold)
	}
}
