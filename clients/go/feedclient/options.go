package feedclient

import (
	"time"

	"google.golang.org/grpc"
)

// Options tell Dial where the server is and how to talk to it.
type Options struct {
	// Server is the gRPC address, host:port.
	Server string

	// TLS turns TLS on with the system's root certificates. Setting TLSCAFile implies it.
	TLS bool
	// TLSCAFile is a PEM file of the CA certificates that verify the server.
	TLSCAFile string
	// TLSServerName overrides the name checked in the server's certificate.
	TLSServerName string
	// TLSCertFile and TLSKeyFile are the client's certificate and key (mutual TLS).
	TLSCertFile string
	TLSKeyFile  string

	// Token is sent on every call as "authorization: Bearer <Token>".
	Token string
	// AllowTokenWithoutTLS sends Token over a plaintext connection too (development only).
	AllowTokenWithoutTLS bool

	// Retry governs Reserve, AdjustStock, Commit and Release. Zero fields take the
	// defaults of DefaultRetry.
	Retry RetryPolicy
	// StreamRetry governs the reconnections of WatchStock and FollowOrder; its MaxAttempts
	// counts consecutive attempts that received nothing (0: retry until the context ends).
	// Zero fields take the defaults of DefaultStreamRetry.
	StreamRetry RetryPolicy

	// OnRetry, when set, is called before each retry of a mutating call (logging,
	// metrics); it must not block for long.
	OnRetry func(RetryInfo)

	// WaitReady makes Dial wait (bounded by its context) until the connection is up.
	WaitReady bool

	// UserAgent is prepended to the gRPC user agent.
	UserAgent string
	// DialOptions are appended to the options Dial builds.
	DialOptions []grpc.DialOption
}

// RetryInfo describes a retry of a mutating call, for Options.OnRetry.
type RetryInfo struct {
	Method         string
	IdempotencyKey string
	// Attempt is the number of the attempt that failed (1 for the first).
	Attempt int
	Err     error
	// Delay is the wait before the next attempt.
	Delay time.Duration
}

// RetryPolicy bounds and spaces the attempts of a call.
type RetryPolicy struct {
	// MaxAttempts is the number of attempts, the first included (0: the default; for
	// streams, 0 means no bound).
	MaxAttempts int
	// InitialBackoff is the wait before the first retry.
	InitialBackoff time.Duration
	// MaxBackoff caps every wait.
	MaxBackoff time.Duration
	// Multiplier grows the wait after each failed attempt (at least 1).
	Multiplier float64
	// Jitter spreads each wait uniformly over ±Jitter of it (at most 1; negative: none).
	Jitter float64
	// AttemptTimeout bounds one unary attempt; when it expires the attempt counts as a
	// DEADLINE_EXCEEDED and is retried with the same idempotency key (negative: no bound).
	AttemptTimeout time.Duration
}

// DefaultRetry is the policy of the mutating calls.
var DefaultRetry = RetryPolicy{
	MaxAttempts:    6,
	InitialBackoff: 100 * time.Millisecond,
	MaxBackoff:     3 * time.Second,
	Multiplier:     2,
	Jitter:         0.2,
	AttemptTimeout: 10 * time.Second,
}

// DefaultStreamRetry is the policy of the reconnections of the streams.
var DefaultStreamRetry = RetryPolicy{
	MaxAttempts:    0,
	InitialBackoff: 100 * time.Millisecond,
	MaxBackoff:     5 * time.Second,
	Multiplier:     2,
	Jitter:         0.2,
}

// withDefaults fills the zero fields of p from def.
func (p RetryPolicy) withDefaults(def RetryPolicy) RetryPolicy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = def.MaxAttempts
	}
	if p.InitialBackoff <= 0 {
		p.InitialBackoff = def.InitialBackoff
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = def.MaxBackoff
	}
	if p.MaxBackoff < p.InitialBackoff {
		p.MaxBackoff = p.InitialBackoff
	}
	if p.Multiplier < 1 {
		p.Multiplier = def.Multiplier
	}
	switch {
	case p.Jitter == 0:
		p.Jitter = def.Jitter
	case p.Jitter < 0:
		p.Jitter = 0
	case p.Jitter > 1:
		p.Jitter = 1
	}
	switch {
	case p.AttemptTimeout == 0:
		p.AttemptTimeout = def.AttemptTimeout
	case p.AttemptTimeout < 0:
		p.AttemptTimeout = 0
	}
	return p
}
