package feedclient

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// backoff returns the wait before retry number n (n = 1 for the first retry):
// InitialBackoff * Multiplier^(n-1), capped at MaxBackoff, then spread by ±Jitter with
// r, a uniform number in [0, 1). The policy must have its defaults filled in.
func (p RetryPolicy) backoff(n int, r float64) time.Duration {
	if n < 1 {
		n = 1
	}
	d := float64(p.InitialBackoff) * math.Pow(p.Multiplier, float64(n-1))
	if d > float64(p.MaxBackoff) || math.IsInf(d, 1) || math.IsNaN(d) {
		d = float64(p.MaxBackoff)
	}
	d *= 1 - p.Jitter + 2*p.Jitter*r
	if d < 0 {
		d = 0
	}
	return time.Duration(d)
}

// sleeper waits between attempts; tests replace it to run without real time.
type sleeper func(ctx context.Context, d time.Duration) error

// sleepCtx waits for d or until ctx ends, whichever comes first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// uniform is the source of the jitter; tests replace it.
var uniform = rand.Float64
