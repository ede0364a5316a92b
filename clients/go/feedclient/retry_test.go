package feedclient

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeSleep records the waits instead of sleeping.
type fakeSleep struct{ waits []time.Duration }

func (f *fakeSleep) sleep(ctx context.Context, d time.Duration) error {
	f.waits = append(f.waits, d)
	return ctx.Err()
}

func testRetrier(max int) (retrier, *fakeSleep) {
	fs := &fakeSleep{}
	p := RetryPolicy{MaxAttempts: max, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, Multiplier: 2, Jitter: -1, AttemptTimeout: -1}
	return retrier{policy: p.withDefaults(DefaultRetry), sleep: fs.sleep, rand: func() float64 { return 0.5 }}, fs
}

// failThen fails with the given errors, one per attempt, then succeeds.
func failThen(errs ...error) (func(context.Context) error, *int) {
	calls := 0
	return func(context.Context) error {
		calls++
		if calls <= len(errs) {
			return errs[calls-1]
		}
		return nil
	}, &calls
}

func TestRetrierRetriesTransientErrorsWithBackoff(t *testing.T) {
	r, fs := testRetrier(6)
	unavailable := status.Error(codes.Unavailable, "down")
	f, calls := failThen(unavailable, status.Error(codes.DeadlineExceeded, "slow"), unavailable, unavailable)
	n, err, last := r.do(context.Background(), f)
	if err != nil || last != nil {
		t.Fatalf("do = %v, %v; want success", err, last)
	}
	if n != 5 || *calls != 5 {
		t.Errorf("attempts = %d (calls %d), want 5", n, *calls)
	}
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond}
	if len(fs.waits) != len(want) {
		t.Fatalf("waits = %v, want %v", fs.waits, want)
	}
	for i := range want {
		if fs.waits[i] != want[i] {
			t.Errorf("wait %d = %v, want %v", i, fs.waits[i], want[i])
		}
	}
}

func TestRetrierStopsAtMaxAttempts(t *testing.T) {
	r, fs := testRetrier(3)
	down := status.Error(codes.Unavailable, "down")
	f, calls := failThen(down, down, down, down, down)
	n, err, _ := r.do(context.Background(), f)
	if status.Code(err) != codes.Unavailable || n != 3 || *calls != 3 || len(fs.waits) != 2 {
		t.Errorf("do = %d attempts, %v, %d calls, %d waits; want 3 attempts ending UNAVAILABLE, 2 waits", n, err, *calls, len(fs.waits))
	}
}

func TestRetrierDoesNotRetryRefusals(t *testing.T) {
	for _, code := range []codes.Code{codes.FailedPrecondition, codes.InvalidArgument, codes.AlreadyExists, codes.NotFound} {
		r, fs := testRetrier(6)
		f, calls := failThen(status.Error(code, "no"))
		n, err, _ := r.do(context.Background(), f)
		if status.Code(err) != code || n != 1 || *calls != 1 || len(fs.waits) != 0 {
			t.Errorf("%v: %d attempts, err %v, %d waits; want one attempt and the error", code, n, err, len(fs.waits))
		}
	}
}

func TestRetrierRespectsCallerContext(t *testing.T) {
	r, _ := testRetrier(0) // no bound on attempts: only ctx ends it
	ctx, cancel := context.WithCancel(context.Background())
	down := status.Error(codes.Unavailable, "down")
	calls := 0
	n, err, last := r.do(ctx, func(context.Context) error {
		calls++
		if calls == 3 {
			cancel()
		}
		return down
	})
	if !errors.Is(err, context.Canceled) || last != down || n != 3 {
		t.Errorf("do = %d attempts, %v (last %v); want 3 attempts, context.Canceled, last UNAVAILABLE", n, err, last)
	}

	// A context that is already done sends nothing.
	calls = 0
	n, err, _ = r.do(ctx, func(context.Context) error { calls++; return nil })
	if n != 0 || calls != 0 || !errors.Is(err, context.Canceled) {
		t.Errorf("done ctx: %d attempts, %d calls, %v", n, calls, err)
	}
}

func TestRetrierAttemptTimeout(t *testing.T) {
	r, _ := testRetrier(2)
	r.policy.AttemptTimeout = 20 * time.Millisecond
	var deadlines []bool
	n, err, _ := r.do(context.Background(), func(ctx context.Context) error {
		_, ok := ctx.Deadline()
		deadlines = append(deadlines, ok)
		<-ctx.Done() // a hung call: only the attempt timeout ends it
		return status.FromContextError(ctx.Err()).Err()
	})
	if n != 2 || status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("do = %d attempts, %v; want 2 attempts ending DEADLINE_EXCEEDED", n, err)
	}
	for i, ok := range deadlines {
		if !ok {
			t.Errorf("attempt %d had no deadline", i+1)
		}
	}
}

func TestCallErrorKeepsTheCode(t *testing.T) {
	e := &CallError{Method: "Reserve", IdempotencyKey: "k", Attempts: 1, Err: status.Error(codes.FailedPrecondition, "insufficient stock")}
	if !IsShortStock(e) || IsInvalid(e) {
		t.Errorf("IsShortStock/IsInvalid wrong for %v", e)
	}
	c := &CallError{Method: "Reserve", IdempotencyKey: "k", Attempts: 3, Err: context.Canceled, Last: status.Error(codes.Unavailable, "down")}
	if status.Code(c) != codes.Canceled || !errors.Is(c, context.Canceled) {
		t.Errorf("status.Code = %v, errors.Is(Canceled) = %v", status.Code(c), errors.Is(c, context.Canceled))
	}
	want := `feedclient: Reserve (idempotency key "k") failed after 3 attempt(s): context canceled (last attempt: rpc error: code = Unavailable desc = down)`
	if c.Error() != want {
		t.Errorf("message:\n got %s\nwant %s", c.Error(), want)
	}
}

func TestNewIdempotencyKey(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		k := NewIdempotencyKey()
		if len(k) != 35 || k[:3] != "go-" {
			t.Fatalf("key %q: want go- and 32 hex digits", k)
		}
		if seen[k] {
			t.Fatalf("key %q generated twice", k)
		}
		seen[k] = true
	}
}
