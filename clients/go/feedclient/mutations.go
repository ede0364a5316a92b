package feedclient

import (
	"context"
	"errors"
	"time"

	"google.golang.org/protobuf/proto"

	"inventoryfeed/clients/go/gen/inventoryv1"
)

// Result is the reply of a mutating call with how it was obtained.
type Result[T any] struct {
	Reply T
	// Replayed: the server had already applied this idempotency key and returned the
	// first result again (e.g. the reply of an earlier attempt was lost).
	Replayed bool
	// IdempotencyKey is the key every attempt sent (generated when none was given).
	IdempotencyKey string
	// Attempts is the number of attempts sent (1 without a retry).
	Attempts int
}

// ReserveOptions are the optional fields of a Reserve.
type ReserveOptions struct {
	// IdempotencyKey identifies the request across retries; generated when empty. Reuse it
	// to retry a Reserve whose outcome is unknown to you (e.g. after a crash).
	IdempotencyKey string
	// TTL is the hold's time to live (0: the server's default).
	TTL time.Duration
	// ReservationID is a client-chosen id (empty: the server generates one).
	ReservationID string
	// OrderID links the hold to an order of yours.
	OrderID string
}

// NewLine is a convenience for a reservation line (empty location: the server's default).
func NewLine(sku, location string, quantity int64) *inventoryv1.Line {
	return &inventoryv1.Line{Sku: sku, Location: location, Quantity: quantity}
}

// Reserve holds stock for all lines or none. It retries as described in the package
// documentation, always with the same idempotency key. Lack of stock is not retried:
// IsShortStock(err) tells it.
func (c *Client) Reserve(ctx context.Context, lines []*inventoryv1.Line, opts ReserveOptions) (*Result[*inventoryv1.ReserveResponse], error) {
	if len(lines) == 0 {
		return nil, errors.New("feedclient: Reserve: no lines")
	}
	req := &inventoryv1.ReserveRequest{
		Lines:          lines,
		TtlMs:          opts.TTL.Milliseconds(),
		ReservationId:  opts.ReservationID,
		OrderId:        opts.OrderID,
		IdempotencyKey: keyOrNew(opts.IdempotencyKey),
	}
	return mutate(ctx, c.retrierFor("Reserve", req.IdempotencyKey), "Reserve", req.IdempotencyKey,
		func(ctx context.Context) (*inventoryv1.ReserveResponse, error) { return c.Inventory.Reserve(ctx, req) })
}

// AdjustStock changes or sets a level's on_hand, with retries under one idempotency key
// (req.IdempotencyKey, generated when empty; req itself is not modified).
func (c *Client) AdjustStock(ctx context.Context, req *inventoryv1.AdjustStockRequest) (*Result[*inventoryv1.AdjustStockResponse], error) {
	if req == nil {
		return nil, errors.New("feedclient: AdjustStock: nil request")
	}
	req = proto.Clone(req).(*inventoryv1.AdjustStockRequest)
	req.IdempotencyKey = keyOrNew(req.IdempotencyKey)
	return mutate(ctx, c.retrierFor("AdjustStock", req.IdempotencyKey), "AdjustStock", req.IdempotencyKey,
		func(ctx context.Context) (*inventoryv1.AdjustStockResponse, error) {
			return c.Inventory.AdjustStock(ctx, req)
		})
}

// Commit turns a held reservation into a sale, with retries under one idempotency key.
func (c *Client) Commit(ctx context.Context, req *inventoryv1.CommitRequest) (*Result[*inventoryv1.CommitResponse], error) {
	if req == nil {
		return nil, errors.New("feedclient: Commit: nil request")
	}
	req = proto.Clone(req).(*inventoryv1.CommitRequest)
	req.IdempotencyKey = keyOrNew(req.IdempotencyKey)
	return mutate(ctx, c.retrierFor("Commit", req.IdempotencyKey), "Commit", req.IdempotencyKey,
		func(ctx context.Context) (*inventoryv1.CommitResponse, error) { return c.Inventory.Commit(ctx, req) })
}

// Release gives a held reservation's stock back, with retries under one idempotency key.
func (c *Client) Release(ctx context.Context, req *inventoryv1.ReleaseRequest) (*Result[*inventoryv1.ReleaseResponse], error) {
	if req == nil {
		return nil, errors.New("feedclient: Release: nil request")
	}
	req = proto.Clone(req).(*inventoryv1.ReleaseRequest)
	req.IdempotencyKey = keyOrNew(req.IdempotencyKey)
	return mutate(ctx, c.retrierFor("Release", req.IdempotencyKey), "Release", req.IdempotencyKey,
		func(ctx context.Context) (*inventoryv1.ReleaseResponse, error) { return c.Inventory.Release(ctx, req) })
}

// retrierFor is the client's retrier for one call, reporting to Options.OnRetry.
func (c *Client) retrierFor(method, key string) retrier {
	r := newRetrier(c.retry)
	if c.onRetry != nil {
		r.hook = func(attempt int, err error, delay time.Duration) {
			c.onRetry(RetryInfo{Method: method, IdempotencyKey: key, Attempt: attempt, Err: err, Delay: delay})
		}
	}
	return r
}

func keyOrNew(key string) string {
	if key != "" {
		return key
	}
	return NewIdempotencyKey()
}

// replayer is every mutating reply: it says whether it was replayed.
type replayer interface{ GetReplayed() bool }

// mutate runs call (which must send key every time) under r and wraps the outcome.
func mutate[T replayer](ctx context.Context, r retrier, method, key string, call func(context.Context) (T, error)) (*Result[T], error) {
	var reply T
	n, err, last := r.do(ctx, func(ctx context.Context) error {
		var err error
		reply, err = call(ctx)
		return err
	})
	if err != nil {
		return nil, &CallError{Method: method, IdempotencyKey: key, Attempts: n, Err: err, Last: last}
	}
	return &Result[T]{Reply: reply, Replayed: reply.GetReplayed(), IdempotencyKey: key, Attempts: n}, nil
}
