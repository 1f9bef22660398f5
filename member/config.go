package member

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/epoch"
)

// Config configures [Join]. Only Group, Topics and a way to reach the
// cluster (Brokers or Client) are required; every other field has a
// default, named in its comment.
type Config struct {
	// Brokers are the seed brokers: tenure's address, or a Kafka cluster's.
	Brokers []string
	// TLS, if not nil, makes the client Join creates from Brokers
	// connect with TLS (kgo.DialTLSConfig): to tenure's SSL and SASL_SSL
	// listeners. Certificates in it are shown to a listener that requires
	// them (mTLS).
	TLS *tls.Config
	// SASL, if not nil, makes the client Join creates authenticate with
	// it (kgo.SASL), to tenure's SASL_PLAINTEXT and SASL_SSL listeners:
	// kgo's sasl/plain or sasl/scram, for example
	// scram.Auth{User: "alice", Pass: pass}.AsSha512Mechanism().
	SASL sasl.Mechanism
	// ClientOpts are extra options for the client Join creates from
	// Brokers: a dialer, a logger... They come after those of TLS and
	// SASL, and so override them.
	ClientOpts []kgo.Opt
	// Client, if not nil, is used instead of creating one (Brokers, TLS,
	// SASL and ClientOpts are then ignored), and is not closed by the
	// session. The
	// member only sends requests through it; it must not consume as a
	// group itself.
	Client *kgo.Client

	// Group is the consumer group to join.
	Group string
	// Topics are the topics whose partitions the member claims.
	Topics []string
	// MemberID identifies the member. Default: a random 128-bit ID,
	// URL-safe base64, as Kafka's clients generate.
	MemberID string
	// InstanceID makes the member static (KIP-345): a restarted member with
	// the same instance ID gets its predecessor's partitions back, without
	// a rebalance, if it returns within the session timeout. Its Close
	// leaves temporarily for that reason. Default: dynamic.
	InstanceID string
	// Rack is the member's rack, for rack-aware assignors.
	Rack string
	// Assignor is the server-side assignor to ask for ("uniform",
	// "range"). Default: the coordinator's.
	Assignor string

	// SessionTimeout is the coordinator's session timeout for KIP-848
	// members (tenure: ConsumerSessionTimeout; Kafka:
	// group.consumer.session.timeout.ms). The protocol does not tell
	// members, and a value longer than the coordinator's would let a cut
	// off member work on after its partitions moved: set it to the
	// coordinator's, or lower. Default 20 s, tenure's default.
	SessionTimeout time.Duration
	// RebalanceTimeout is how long a handler may take, once its claim is
	// revoked, to commit and return. Past it the coordinator evicts the
	// member and every claim is Lost. Default 60 s.
	RebalanceTimeout time.Duration
	// MaxDrift bounds the rate difference between the member's clock and
	// the coordinator's. Default (and when 0) 1 %.
	MaxDrift float64
	// SuspectMargin is how much earlier than the drift allowance requires
	// claims go Suspect: the time a handler needs to notice and stop.
	// Default SessionTimeout/20 (1 s for 20 s).
	SuspectMargin time.Duration
	// RequestTimeout bounds one heartbeat round trip. Default
	// SessionTimeout/5 (4 s for 20 s).
	RequestTimeout time.Duration

	// Logger receives the member's logs. Default: none.
	Logger *zap.Logger
}

// defaults returns c with every unset field at its default.
func (c Config) defaults() Config {
	if c.MemberID == "" {
		c.MemberID = newMemberID()
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = 20 * time.Second
	}
	if c.RebalanceTimeout == 0 {
		c.RebalanceTimeout = 60 * time.Second
	}
	if c.MaxDrift == 0 {
		c.MaxDrift = epoch.DefaultMaxDrift
	}
	if c.SuspectMargin == 0 {
		c.SuspectMargin = c.SessionTimeout / 20
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = c.SessionTimeout / 5
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// clientOpts are the options of the client Join creates.
func (c Config) clientOpts() []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(c.Brokers...)}
	if c.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(c.TLS))
	}
	if c.SASL != nil {
		opts = append(opts, kgo.SASL(c.SASL))
	}
	return append(opts, c.ClientOpts...)
}

// machineConfig is the core's share of the config.
func (c Config) machineConfig() MachineConfig {
	return MachineConfig{
		Group:            c.Group,
		MemberID:         c.MemberID,
		InstanceID:       c.InstanceID,
		RackID:           c.Rack,
		Topics:           c.Topics,
		Assignor:         c.Assignor,
		RebalanceTimeout: c.RebalanceTimeout,
		SessionTimeout:   c.SessionTimeout,
		MaxDrift:         c.MaxDrift,
		SuspectMargin:    c.SuspectMargin,
		RequestTimeout:   c.RequestTimeout,
	}
}

// validate checks a config with its defaults applied.
func (c Config) validate() error {
	var errs []error
	if c.Client == nil && len(c.Brokers) == 0 {
		errs = append(errs, fmt.Errorf("%w: no brokers and no client", ErrConfig))
	}
	errs = append(errs, c.machineConfig().Validate())
	return errors.Join(errs...)
}

// newMemberID returns 16 random bytes in URL-safe base64, as Kafka's
// clients generate KIP-848 member IDs.
func newMemberID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails
	return base64.RawURLEncoding.EncodeToString(b[:])
}
