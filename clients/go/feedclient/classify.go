package feedclient

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// retryableUnary tells whether a failed mutating call may be sent again with the same
// idempotency key. Never when the caller's context has ended: its CANCELLED or
// DEADLINE_EXCEEDED are the caller's own decision.
func retryableUnary(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	switch status.Code(err) {
	case codes.Unavailable, // server down, restarting, or the connection broke
		codes.DeadlineExceeded,  // the attempt's own timeout (the caller's ctx is still alive)
		codes.Canceled,          // a call that arrived while the server was shutting down
		codes.ResourceExhausted: // the server's write queue is full: back off and retry
		return true
	}
	return false
}

// streamAction is what a stream loop does after its stream ended.
type streamAction int

const (
	// actionStop ends the loop and returns the error to the caller.
	actionStop streamAction = iota
	// actionReconnect opens the stream again, resuming where it was.
	actionReconnect
	// actionSnapshot opens the stream again asking for a fresh snapshot when the server no
	// longer retains the changes to resume from.
	actionSnapshot
)

func (a streamAction) String() string {
	switch a {
	case actionReconnect:
		return "reconnect"
	case actionSnapshot:
		return "snapshot"
	}
	return "stop"
}

// classifyStreamEnd decides what follows the end of a stream (err as returned by Recv).
func classifyStreamEnd(ctx context.Context, err error) streamAction {
	if ctx.Err() != nil {
		return actionStop
	}
	if err == nil || errors.Is(err, io.EOF) {
		// The server closed the stream without an error before its natural end (a
		// WatchStock stream has none): open it again.
		return actionReconnect
	}
	switch status.Code(err) {
	case codes.Unavailable, // server shutdown or connection lost
		codes.Canceled,          // not the caller's (its ctx is alive): the server's shutdown
		codes.DeadlineExceeded,  // not the caller's deadline
		codes.ResourceExhausted: // the reader fell too far behind: resume from the last sequence
		return actionReconnect
	case codes.OutOfRange:
		return actionSnapshot
	}
	return actionStop
}
