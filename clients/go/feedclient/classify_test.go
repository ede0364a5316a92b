package feedclient

import (
	"context"
	"fmt"
	"io"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestRetryableUnary(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		ctx  context.Context
		err  error
		want bool
	}{
		{live, nil, false},
		{live, status.Error(codes.Unavailable, "connection refused"), true},
		{live, status.Error(codes.DeadlineExceeded, "attempt timeout"), true},
		{live, status.Error(codes.Canceled, "server shutting down"), true},
		{live, status.Error(codes.ResourceExhausted, "queue full"), true},
		{live, fmt.Errorf("wrapped: %w", status.Error(codes.Unavailable, "x")), true},
		{live, status.Error(codes.FailedPrecondition, "insufficient stock"), false},
		{live, status.Error(codes.InvalidArgument, "bad quantity"), false},
		{live, status.Error(codes.AlreadyExists, "key reused with another request"), false},
		{live, status.Error(codes.Unauthenticated, "no token"), false},
		{live, status.Error(codes.Internal, "bug"), false},
		// The caller's own cancellation or deadline is never retried.
		{done, status.Error(codes.Canceled, "context canceled"), false},
		{done, status.Error(codes.Unavailable, "x"), false},
	}
	for _, c := range cases {
		if got := retryableUnary(c.ctx, c.err); got != c.want {
			t.Errorf("retryableUnary(ctx done=%v, %v) = %v, want %v", c.ctx.Err() != nil, c.err, got, c.want)
		}
	}
}

func TestClassifyStreamEnd(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		ctx  context.Context
		err  error
		want streamAction
	}{
		{live, status.Error(codes.Unavailable, "server shutting down"), actionReconnect},
		{live, status.Error(codes.Canceled, "shutdown"), actionReconnect},
		{live, status.Error(codes.ResourceExhausted, "reader behind"), actionReconnect},
		{live, status.Error(codes.DeadlineExceeded, "x"), actionReconnect},
		{live, io.EOF, actionReconnect},
		{live, status.Error(codes.OutOfRange, "oldest retained: 7"), actionSnapshot},
		{live, status.Error(codes.InvalidArgument, "too many keys"), actionStop},
		{live, status.Error(codes.NotFound, "no such order"), actionStop},
		{live, status.Error(codes.PermissionDenied, "scope"), actionStop},
		{done, status.Error(codes.Canceled, "context canceled"), actionStop},
		{done, status.Error(codes.Unavailable, "x"), actionStop},
	}
	for _, c := range cases {
		if got := classifyStreamEnd(c.ctx, c.err); got != c.want {
			t.Errorf("classifyStreamEnd(ctx done=%v, %v) = %v, want %v", c.ctx.Err() != nil, c.err, got, c.want)
		}
	}
}
