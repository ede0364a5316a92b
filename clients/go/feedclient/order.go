package feedclient

import (
	"context"
	"errors"

	"inventoryfeed/clients/go/gen/orderv1"
)

// FollowOption changes how FollowOrder reports.
type FollowOption func(*followConfig)

type followConfig struct {
	hook func(Reconnect)
}

// WithOrderReconnectHook calls f before each reconnection of FollowOrder.
func WithOrderReconnectHook(f func(Reconnect)) FollowOption {
	return func(c *followConfig) { c.hook = f }
}

// IsTerminal tells whether an order status is final (DELIVERED, CANCELLED, EXPIRED).
func IsTerminal(s orderv1.OrderStatus) bool {
	switch s {
	case orderv1.OrderStatus_ORDER_STATUS_DELIVERED,
		orderv1.OrderStatus_ORDER_STATUS_CANCELLED,
		orderv1.OrderStatus_ORDER_STATUS_EXPIRED:
		return true
	}
	return false
}

// updateStatus is an update's status, from status_code or else from the status name.
func updateStatus(u *orderv1.OrderStatusUpdate) orderv1.OrderStatus {
	if c := u.GetStatusCode(); c != orderv1.OrderStatus_ORDER_STATUS_UNSPECIFIED {
		return c
	}
	if v, ok := orderv1.OrderStatus_value["ORDER_STATUS_"+u.GetStatus()]; ok {
		return orderv1.OrderStatus(v)
	}
	return orderv1.OrderStatus_ORDER_STATUS_UNSPECIFIED
}

// orderResume drops what a reconnected StreamOrderUpdates sends again (it starts with the
// current status, which the handler may have had already).
type orderResume struct {
	seen       bool
	last       uint64
	lastStatus orderv1.OrderStatus
}

// accept tells whether the handler gets u, and whether the order has reached its end.
func (o *orderResume) accept(u *orderv1.OrderStatusUpdate) (deliver, terminal bool) {
	s := updateStatus(u)
	terminal = IsTerminal(s)
	if o.seen {
		if seq := u.GetSequence(); seq != 0 && seq <= o.last {
			return false, terminal
		}
		if u.GetSequence() == 0 && s == o.lastStatus {
			return false, terminal
		}
	}
	o.seen = true
	if u.GetSequence() > o.last {
		o.last = u.GetSequence()
	}
	o.lastStatus = s
	return true, terminal
}

// FollowOrder streams an order's status updates to handler: the current status first,
// then every change, and returns nil once a terminal status (DELIVERED, CANCELLED,
// EXPIRED) has been handed over. It reconnects like WatchStock, without repeating an
// update. The server does not replay an order's history: a status the order passed
// through while the stream was down is not handed over, the one it has on reconnection
// is (the handler learns where the order is, but may skip a stage). Other ends:
// ctx.Err(), handler's error (ErrStop: nil), the server's refusal (e.g. NOT_FOUND).
func (c *Client) FollowOrder(ctx context.Context, orderID string, handler func(*orderv1.OrderStatusUpdate) error, opts ...FollowOption) error {
	if handler == nil {
		return errors.New("feedclient: FollowOrder: nil handler")
	}
	if orderID == "" {
		return errors.New("feedclient: FollowOrder: empty order id")
	}
	var cfg followConfig
	for _, o := range opts {
		o(&cfg)
	}
	var st orderResume
	loop := streamLoop[*orderv1.OrderStatusUpdate]{
		name:   "FollowOrder",
		policy: c.streamRetry,
		sleep:  sleepCtx,
		rand:   uniform,
		open: func(ctx context.Context) (func() (*orderv1.OrderStatusUpdate, error), error) {
			req := &orderv1.OrderSubscriptionRequest{OrderId: orderID}
			address, conn := c.router.target(req, c.conn)
			stream, err := orderv1.NewOrderServiceClient(conn).StreamOrderUpdates(ctx, req)
			if err != nil {
				return nil, err
			}
			return routedRecv(ctx, c.router, req, address, stream), nil
		},
		step: func(u *orderv1.OrderStatusUpdate) (bool, error) {
			deliver, terminal := st.accept(u)
			if deliver {
				if err := handler(u); err != nil {
					return false, err
				}
			}
			return terminal, nil
		},
		hook: cfg.hook,
	}
	return loop.run(ctx)
}
