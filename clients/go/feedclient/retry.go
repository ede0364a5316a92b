package feedclient

import (
	"context"
	"time"
)

// retrier runs a unary call under a policy (defaults filled in).
type retrier struct {
	policy RetryPolicy
	sleep  sleeper
	rand   func() float64
	// hook, when set, is told about each retry (attempt that failed, its error, the wait).
	hook func(attempt int, err error, delay time.Duration)
}

func newRetrier(p RetryPolicy) retrier {
	return retrier{policy: p, sleep: sleepCtx, rand: uniform}
}

// do calls attempt until it succeeds, fails with an error that is not worth a retry, the
// attempts run out or ctx ends. Each attempt gets its own timeout when the policy has
// one. It returns how many attempts were sent and, on failure, the final error: the last
// attempt's, or the context's when ctx ended (then last is the last attempt's error).
func (r retrier) do(ctx context.Context, attempt func(ctx context.Context) error) (n int, err, last error) {
	for {
		if cerr := ctx.Err(); cerr != nil {
			return n, cerr, last
		}
		n++
		err = r.once(ctx, attempt)
		if err == nil {
			return n, nil, nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return n, cerr, err
		}
		if !retryableUnary(ctx, err) {
			return n, err, nil
		}
		if r.policy.MaxAttempts > 0 && n >= r.policy.MaxAttempts {
			return n, err, nil
		}
		last = err
		delay := r.policy.backoff(n, r.rand())
		if r.hook != nil {
			r.hook(n, err, delay)
		}
		if serr := r.sleep(ctx, delay); serr != nil {
			return n, serr, err
		}
	}
}

func (r retrier) once(ctx context.Context, attempt func(ctx context.Context) error) error {
	if r.policy.AttemptTimeout <= 0 {
		return attempt(ctx)
	}
	actx, cancel := context.WithTimeout(ctx, r.policy.AttemptTimeout)
	defer cancel()
	return attempt(actx)
}
