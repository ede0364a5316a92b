package feedclient

import (
	"context"
	"testing"
	"time"
)

func TestBackoffGrowsAndIsCapped(t *testing.T) {
	p := RetryPolicy{InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second, Multiplier: 2, Jitter: -1}.withDefaults(DefaultRetry)
	if p.Jitter != 0 {
		t.Fatalf("negative jitter should mean none, got %v", p.Jitter)
	}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := p.backoff(i+1, 0.5); got != w*time.Millisecond {
			t.Errorf("backoff(%d) = %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	if got := p.backoff(0, 0.5); got != 100*time.Millisecond {
		t.Errorf("backoff(0) = %v, want the initial backoff", got)
	}
	if got := p.backoff(10000, 0.5); got != time.Second {
		t.Errorf("backoff(10000) = %v, want the cap", got)
	}
}

func TestBackoffJitterBounds(t *testing.T) {
	p := RetryPolicy{InitialBackoff: time.Second, MaxBackoff: time.Second, Multiplier: 2, Jitter: 0.2}.withDefaults(DefaultRetry)
	if got := p.backoff(1, 0); got != 800*time.Millisecond {
		t.Errorf("lowest = %v, want 800ms", got)
	}
	if got := p.backoff(1, 0.5); got != time.Second {
		t.Errorf("middle = %v, want 1s", got)
	}
	if got := p.backoff(1, 0.999999); got < 1199*time.Millisecond || got > 1200*time.Millisecond {
		t.Errorf("highest = %v, want just under 1.2s", got)
	}
}

func TestWithDefaults(t *testing.T) {
	p := RetryPolicy{}.withDefaults(DefaultRetry)
	if p != DefaultRetry {
		t.Errorf("zero policy = %+v, want the defaults %+v", p, DefaultRetry)
	}
	p = RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Second, MaxBackoff: time.Millisecond, Jitter: 5, AttemptTimeout: -1}.withDefaults(DefaultRetry)
	if p.MaxAttempts != 2 || p.MaxBackoff != time.Second || p.Jitter != 1 || p.AttemptTimeout != 0 {
		t.Errorf("got %+v: want MaxAttempts 2, MaxBackoff raised to InitialBackoff, Jitter 1, no attempt timeout", p)
	}
	if s := (RetryPolicy{}).withDefaults(DefaultStreamRetry); s.MaxAttempts != 0 {
		t.Errorf("streams retry without bound by default, got MaxAttempts %d", s.MaxAttempts)
	}
}

func TestSleepCtx(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := sleepCtx(ctx, time.Hour); err != context.Canceled {
		t.Errorf("sleepCtx on a cancelled ctx = %v, want context.Canceled", err)
	}
	if time.Since(start) > time.Second {
		t.Error("sleepCtx did not return at once on a cancelled ctx")
	}
	if err := sleepCtx(context.Background(), time.Millisecond); err != nil {
		t.Errorf("sleepCtx = %v", err)
	}
}
