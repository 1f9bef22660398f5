package store

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/acl"
)

// Memory is a Store that keeps the latest state of every group in process
// memory: a coordinator.RecordSet behind a lock. It survives nothing, not
// even a restart of the process: use it for tests, the simulator and
// `tenure serve --store=memory`.
//
// It compacts as it goes (RecordSet), so a long-running server does not
// grow with the number of commits; a deleted group keeps only its
// tombstone, so that a group re-created under the same name continues from
// its epoch.
type Memory struct {
	mu     sync.Mutex
	closed bool
	set    *coordinator.RecordSet
	creds  map[credentialKey]*Credential
	acls   map[acl.Binding]bool
	// keys is the signing key ring (keys.go), keysVersion its version.
	keys        []SigningKey
	keysVersion int64
}

type credentialKey struct{ user, mechanism string }

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{set: coordinator.NewRecordSet(), creds: make(map[credentialKey]*Credential)}
}

// Persist implements Store. A batch with a record of an unknown type
// writes nothing.
func (m *Memory) Persist(_ context.Context, recs []coordinator.Record) error {
	if err := Check(recs); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	for _, r := range recs {
		if err := m.set.Apply(r); err != nil {
			return err // Check admitted a type RecordSet does not know
		}
	}
	return nil
}

// Load implements Store.
func (m *Memory) Load(context.Context) ([]coordinator.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	return m.set.Records(), nil
}

// LoadGroup implements Store.
func (m *Memory) LoadGroup(_ context.Context, group string) ([]coordinator.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	return m.set.Group(group), nil
}

// LoadLog implements LogStore.
func (m *Memory) LoadLog(_ context.Context, group string, before int32, limit int) ([]*coordinator.GenerationRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	return NewestFirst(m.set.Log(group), before, limit), nil
}

// NewestFirst returns the entries of log (oldest first) below epoch
// before (if before > 0), newest first, at most limit of them (if
// limit > 0).
func NewestFirst(log []*coordinator.GenerationRecord, before int32, limit int) []*coordinator.GenerationRecord {
	var out []*coordinator.GenerationRecord
	for i := len(log) - 1; i >= 0 && (limit <= 0 || len(out) < limit); i-- {
		if before <= 0 || log[i].Epoch < before {
			out = append(out, log[i])
		}
	}
	return out
}

// CreateTopic implements TopicStore.
func (m *Memory) CreateTopic(_ context.Context, rec *coordinator.TopicRecord) (*coordinator.TopicRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if t := m.set.Topic(rec.Name); t != nil {
		return t, nil
	}
	if err := m.set.Apply(rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// DeleteTopic implements TopicStore.
func (m *Memory) DeleteTopic(_ context.Context, rec *coordinator.TopicRecord) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false, ErrClosed
	}
	if t := m.set.Topic(rec.Name); t == nil || t.ID != rec.ID {
		return false, nil
	}
	if err := m.set.Apply(&coordinator.TopicRecord{Name: rec.Name, Deleted: true}); err != nil {
		return false, err
	}
	return true, nil
}

// LoadTopics implements TopicStore.
func (m *Memory) LoadTopics(context.Context) ([]*coordinator.TopicRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	return m.set.Topics(), nil
}

// Credential implements CredentialStore.
func (m *Memory) Credential(_ context.Context, user, mechanism string) (*Credential, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	c, ok := m.creds[credentialKey{user, mechanism}]
	if !ok {
		return nil, ErrNoCredential
	}
	return c, nil
}

// Credentials implements CredentialStore.
func (m *Memory) Credentials(context.Context) ([]*Credential, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]*Credential, 0, len(m.creds))
	for _, c := range m.creds {
		out = append(out, c)
	}
	SortCredentials(out)
	return out, nil
}

// AlterCredentials implements CredentialStore. The store keeps its own
// copies, so the caller may reuse creds.
func (m *Memory) AlterCredentials(_ context.Context, creds []*Credential) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	for _, c := range creds {
		k := credentialKey{c.User, c.Mechanism}
		if c.Deleted {
			delete(m.creds, k)
			continue
		}
		cp := *c
		cp.Salt, cp.StoredKey, cp.ServerKey = slices.Clone(c.Salt), slices.Clone(c.StoredKey), slices.Clone(c.ServerKey)
		m.creds[k] = &cp
	}
	return nil
}

// Close implements Store.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

func unknownRecord(r coordinator.Record) error { return fmt.Errorf("%w: %T", ErrUnknownRecord, r) }
