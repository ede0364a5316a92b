package feedclient

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrStop, returned by a WatchStock or FollowOrder handler, ends the stream; the call
// then returns nil.
var ErrStop = errors.New("feedclient: stop")

// ErrProtocol marks an update the server should never send (it would break the no-gap
// bookkeeping); the stream ends with an error wrapping it.
var ErrProtocol = errors.New("feedclient: protocol violation")

// CallError is the error of a mutating call that did not succeed: which call, with which
// idempotency key, after how many attempts. status.Code(err) gives the gRPC code (the
// context's when the context ended between attempts).
type CallError struct {
	Method         string
	IdempotencyKey string
	Attempts       int
	// Err is the final error: the last attempt's, or the context's when the context ended
	// while waiting to retry.
	Err error
	// Last is the last attempt's error when Err is the context's, else nil.
	Last error
}

func (e *CallError) Error() string {
	msg := fmt.Sprintf("feedclient: %s (idempotency key %q) failed after %d attempt(s): %v",
		e.Method, e.IdempotencyKey, e.Attempts, e.Err)
	if e.Last != nil {
		msg += fmt.Sprintf(" (last attempt: %v)", e.Last)
	}
	return msg
}

func (e *CallError) Unwrap() error { return e.Err }

// GRPCStatus lets status.Code and status.FromError see the code of Err.
func (e *CallError) GRPCStatus() *status.Status {
	if errors.Is(e.Err, context.Canceled) || errors.Is(e.Err, context.DeadlineExceeded) {
		return status.FromContextError(e.Err)
	}
	return status.Convert(e.Err)
}

// IsShortStock tells whether err is the server's refusal for lack of stock
// (FAILED_PRECONDITION): retrying the same request will not help.
func IsShortStock(err error) bool {
	return status.Code(err) == codes.FailedPrecondition
}

// IsInvalid tells whether the server refused the request as malformed (INVALID_ARGUMENT).
func IsInvalid(err error) bool {
	return status.Code(err) == codes.InvalidArgument
}
