package feedclient

import (
	"context"
	"errors"

	"inventoryfeed/clients/go/gen/inventoryv1"
)

// WatchOption changes how WatchStock starts or reports.
type WatchOption func(*watchConfig)

type watchConfig struct {
	resumeAfter   uint64
	snapshotOnGap bool
	hook          func(Reconnect)
}

// WithResumeAfter starts with the changes after sequence n (e.g. the sequence of a reply,
// or the last one a previous run processed) instead of a snapshot.
func WithResumeAfter(n uint64) WatchOption { return func(c *watchConfig) { c.resumeAfter = n } }

// WithSnapshotOnGap asks for a fresh snapshot, rather than an OUT_OF_RANGE first, whenever
// the server no longer retains the changes to resume from.
func WithSnapshotOnGap() WatchOption { return func(c *watchConfig) { c.snapshotOnGap = true } }

// WithReconnectHook calls f before each reconnection (f must not block for long).
func WithReconnectHook(f func(Reconnect)) WatchOption { return func(c *watchConfig) { c.hook = f } }

// StockKey is a convenience for a watch or read key (empty location: every location).
func StockKey(sku, location string) *inventoryv1.StockKey {
	return &inventoryv1.StockKey{Sku: sku, Location: location}
}

// WatchStock streams the stock updates of keys (none: every level) to handler, in
// sequence order, until ctx ends (it then returns ctx.Err()), handler returns an error
// (returned as is; ErrStop ends with nil) or the server refuses the call.
//
// It starts with a snapshot (KIND_SNAPSHOT rows, then KIND_SNAPSHOT_END) unless
// WithResumeAfter is given, then passes on every change. When the stream ends with
// UNAVAILABLE, CANCELLED (not the caller's), DEADLINE_EXCEEDED or RESOURCE_EXHAUSTED it
// reconnects with backoff, resuming after the highest sequence it delivered: the handler
// sees each change once, with no gap. If the server no longer retains those changes
// (OUT_OF_RANGE) it reconnects with snapshot_on_gap: the handler then gets a fresh
// snapshot, which replaces what it knew. A stream that broke in the middle of a snapshot
// starts the snapshot again: a snapshot is complete only at its KIND_SNAPSHOT_END.
func (c *Client) WatchStock(ctx context.Context, keys []*inventoryv1.StockKey, handler func(*inventoryv1.StockUpdate) error, opts ...WatchOption) error {
	if handler == nil {
		return errors.New("feedclient: WatchStock: nil handler")
	}
	var cfg watchConfig
	for _, o := range opts {
		o(&cfg)
	}
	st := newStockResume(keys, cfg.resumeAfter, cfg.snapshotOnGap)
	loop := streamLoop[*inventoryv1.StockUpdate]{
		name:   "WatchStock",
		policy: c.streamRetry,
		sleep:  sleepCtx,
		rand:   uniform,
		open: func(ctx context.Context) (func() (*inventoryv1.StockUpdate, error), error) {
			req := st.request()
			address, conn := c.router.target(req, c.conn)
			stream, err := inventoryv1.NewInventoryServiceClient(conn).WatchStock(ctx, req)
			if err != nil {
				return nil, err
			}
			return routedRecv(ctx, c.router, req, address, stream), nil
		},
		step: func(u *inventoryv1.StockUpdate) (bool, error) {
			deliver, err := st.accept(u)
			if err != nil || !deliver {
				return false, err
			}
			return false, handler(u)
		},
		onGap: st.onOutOfRange,
	}
	if cfg.hook != nil {
		loop.hook = func(r Reconnect) {
			r.ResumeAfter = st.resumeAfter()
			cfg.hook(r)
		}
	}
	return loop.run(ctx)
}
