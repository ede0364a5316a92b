package feedclient

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Reconnect describes a stream's reconnection, for WithReconnectHook and
// WithOrderReconnectHook (logging, metrics).
type Reconnect struct {
	// Attempt counts the consecutive attempts that received nothing, this one included.
	Attempt int
	// Err is why the previous stream ended.
	Err error
	// Delay is the wait before the next attempt.
	Delay time.Duration
	// ResumeAfter is the sequence the next WatchStock call resumes after (0: a snapshot).
	ResumeAfter uint64
	// Snapshot: the server no longer retained the changes to resume from; the next call
	// asks for a fresh snapshot.
	Snapshot bool
}

// streamLoop is the reconnecting loop shared by WatchStock and FollowOrder.
type streamLoop[M any] struct {
	name   string
	policy RetryPolicy
	sleep  sleeper
	rand   func() float64
	// open starts a new stream and returns its receive function.
	open func(ctx context.Context) (recv func() (M, error), err error)
	// step handles one message: done ends the loop with nil; an error ends it with that
	// error (ErrStop: with nil).
	step func(M) (done bool, err error)
	// onGap is called on OUT_OF_RANGE; nil or an error ends the loop.
	onGap func(err error) error
	// hook, when set, is told about each reconnection.
	hook func(Reconnect)
}

func (l streamLoop[M]) run(ctx context.Context) error {
	failures := 0
	for {
		received, streamErr, stepErr := l.once(ctx)
		if stepErr != nil {
			if errors.Is(stepErr, ErrStop) {
				return nil
			}
			return stepErr
		}
		if streamErr == nil {
			return nil // done
		}
		if received {
			failures = 0
		}
		info := Reconnect{Err: streamErr}
		switch classifyStreamEnd(ctx, streamErr) {
		case actionStop:
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			return fmt.Errorf("feedclient: %s: %w", l.name, streamErr)
		case actionSnapshot:
			if l.onGap == nil {
				return fmt.Errorf("feedclient: %s: %w", l.name, streamErr)
			}
			if err := l.onGap(streamErr); err != nil {
				return err
			}
			info.Snapshot = true
		case actionReconnect:
			failures++
			if l.policy.MaxAttempts > 0 && failures >= l.policy.MaxAttempts {
				return fmt.Errorf("feedclient: %s: gave up after %d attempts without an update: %w", l.name, failures, streamErr)
			}
			info.Delay = l.policy.backoff(failures, l.rand())
		}
		info.Attempt = failures
		if l.hook != nil {
			l.hook(info)
		}
		if err := l.sleep(ctx, info.Delay); err != nil {
			return err
		}
	}
}

// once runs one stream to its end: received tells whether any message came; streamErr is
// how the stream ended (nil when step said done); stepErr is step's error.
func (l streamLoop[M]) once(ctx context.Context) (received bool, streamErr, stepErr error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	recv, err := l.open(sctx)
	if err != nil {
		return false, err, nil
	}
	for {
		m, err := recv()
		if err != nil {
			return received, err, nil
		}
		received = true
		done, err := l.step(m)
		if err != nil {
			return received, nil, err
		}
		if done {
			return received, nil, nil
		}
	}
}
