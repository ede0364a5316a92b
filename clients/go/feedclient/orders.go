package feedclient

import (
	"context"
	"errors"

	"google.golang.org/protobuf/proto"

	"inventoryfeed/clients/go/gen/orderv1"
)

// CreateOrder creates an order and holds its stock, with retries under one idempotency
// key (req.IdempotencyKey, generated when empty; req itself is not modified). Lack of
// stock is FAILED_PRECONDITION, not retried.
func (c *Client) CreateOrder(ctx context.Context, req *orderv1.CreateOrderRequest) (*Result[*orderv1.CreateOrderResponse], error) {
	if req == nil {
		return nil, errors.New("feedclient: CreateOrder: nil request")
	}
	req = proto.Clone(req).(*orderv1.CreateOrderRequest)
	req.IdempotencyKey = keyOrNew(req.IdempotencyKey)
	return mutate(ctx, c.retrierFor("CreateOrder", req.IdempotencyKey), "CreateOrder", req.IdempotencyKey,
		func(ctx context.Context) (*orderv1.CreateOrderResponse, error) {
			return c.Orders.CreateOrder(ctx, req)
		})
}

// PayOrder moves an order from CONFIRMED to PAID, with retries under one idempotency key.
func (c *Client) PayOrder(ctx context.Context, req *orderv1.PayOrderRequest) (*Result[*orderv1.OrderResponse], error) {
	if req == nil {
		return nil, errors.New("feedclient: PayOrder: nil request")
	}
	req = proto.Clone(req).(*orderv1.PayOrderRequest)
	req.IdempotencyKey = keyOrNew(req.IdempotencyKey)
	return mutate(ctx, c.retrierFor("PayOrder", req.IdempotencyKey), "PayOrder", req.IdempotencyKey,
		func(ctx context.Context) (*orderv1.OrderResponse, error) { return c.Orders.PayOrder(ctx, req) })
}

// AdvanceOrder moves a paid order one stage on, with retries under one idempotency key.
func (c *Client) AdvanceOrder(ctx context.Context, req *orderv1.AdvanceOrderRequest) (*Result[*orderv1.OrderResponse], error) {
	if req == nil {
		return nil, errors.New("feedclient: AdvanceOrder: nil request")
	}
	req = proto.Clone(req).(*orderv1.AdvanceOrderRequest)
	req.IdempotencyKey = keyOrNew(req.IdempotencyKey)
	return mutate(ctx, c.retrierFor("AdvanceOrder", req.IdempotencyKey), "AdvanceOrder", req.IdempotencyKey,
		func(ctx context.Context) (*orderv1.OrderResponse, error) { return c.Orders.AdvanceOrder(ctx, req) })
}

// CancelOrder cancels an order, with retries under one idempotency key.
func (c *Client) CancelOrder(ctx context.Context, req *orderv1.CancelOrderRequest) (*Result[*orderv1.OrderResponse], error) {
	if req == nil {
		return nil, errors.New("feedclient: CancelOrder: nil request")
	}
	req = proto.Clone(req).(*orderv1.CancelOrderRequest)
	req.IdempotencyKey = keyOrNew(req.IdempotencyKey)
	return mutate(ctx, c.retrierFor("CancelOrder", req.IdempotencyKey), "CancelOrder", req.IdempotencyKey,
		func(ctx context.Context) (*orderv1.OrderResponse, error) { return c.Orders.CancelOrder(ctx, req) })
}
