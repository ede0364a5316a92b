package feedclient

// These tests run the helpers against an in-process gRPC server (bufconn) that plays
// scripted answers: real status codes and streams, no network, no feed server.

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"inventoryfeed/clients/go/gen/inventoryv1"
	"inventoryfeed/clients/go/gen/orderv1"
)

// streamScript is one WatchStock/StreamOrderUpdates call: what it sends, then how it ends
// (nil: it waits until the client goes away).
type streamScript[M any] struct {
	send []*M
	end  error
}

type fakeServer struct {
	inventoryv1.UnimplementedInventoryServiceServer
	orderv1.UnimplementedOrderServiceServer

	mu           sync.Mutex
	keys         []string // idempotency keys of the Reserve and AdjustStock attempts
	applied      map[string]bool
	fails        []error // answers of the first Reserve / AdjustStock attempts
	lostReplies  int     // attempts that are applied but answer UNAVAILABLE
	watchReqs    []*inventoryv1.WatchStockRequest
	watchScripts []streamScript[inventoryv1.StockUpdate]
	orderScripts []streamScript[orderv1.OrderStatusUpdate]
	authHeaders  []string
}

func (f *fakeServer) Reserve(ctx context.Context, req *inventoryv1.ReserveRequest) (*inventoryv1.ReserveResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = append(f.keys, req.GetIdempotencyKey())
	if len(f.fails) > 0 {
		err := f.fails[0]
		f.fails = f.fails[1:]
		return nil, err
	}
	replayed := f.applied[req.GetIdempotencyKey()]
	f.applied[req.GetIdempotencyKey()] = true
	if f.lostReplies > 0 {
		f.lostReplies--
		return nil, status.Error(codes.Unavailable, "reply lost")
	}
	return &inventoryv1.ReserveResponse{
		Reservation: &inventoryv1.Reservation{ReservationId: "rsv-1", Lines: req.GetLines()},
		Sequence:    7,
		Replayed:    replayed,
	}, nil
}

func (f *fakeServer) AdjustStock(ctx context.Context, req *inventoryv1.AdjustStockRequest) (*inventoryv1.AdjustStockResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = append(f.keys, req.GetIdempotencyKey())
	if len(f.fails) > 0 {
		err := f.fails[0]
		f.fails = f.fails[1:]
		return nil, err
	}
	return &inventoryv1.AdjustStockResponse{Level: &inventoryv1.StockLevel{Sku: req.GetSku(), OnHand: req.GetQuantity()}, Sequence: 3}, nil
}

func (f *fakeServer) WatchStock(req *inventoryv1.WatchStockRequest, stream grpc.ServerStreamingServer[inventoryv1.StockUpdate]) error {
	f.mu.Lock()
	f.watchReqs = append(f.watchReqs, req)
	if len(f.watchScripts) == 0 {
		f.mu.Unlock()
		return status.Error(codes.Internal, "no script left")
	}
	sc := f.watchScripts[0]
	f.watchScripts = f.watchScripts[1:]
	f.mu.Unlock()
	return play(stream, sc)
}

func (f *fakeServer) StreamOrderUpdates(req *orderv1.OrderSubscriptionRequest, stream grpc.ServerStreamingServer[orderv1.OrderStatusUpdate]) error {
	f.mu.Lock()
	if len(f.orderScripts) == 0 {
		f.mu.Unlock()
		return status.Error(codes.NotFound, "no such order")
	}
	sc := f.orderScripts[0]
	f.orderScripts = f.orderScripts[1:]
	f.mu.Unlock()
	return play(stream, sc)
}

func play[M any](stream grpc.ServerStreamingServer[M], sc streamScript[M]) error {
	for _, m := range sc.send {
		if err := stream.Send(m); err != nil {
			return err
		}
	}
	if sc.end == nil {
		<-stream.Context().Done()
		return stream.Context().Err()
	}
	return sc.end
}

// startFake serves f in-process and returns a client of it with fast retries.
func startFake(t *testing.T, f *fakeServer, opts Options) *Client {
	t.Helper()
	if f.applied == nil {
		f.applied = map[string]bool{}
	}
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		f.mu.Lock()
		f.authHeaders = append(f.authHeaders, md.Get("authorization")...)
		f.mu.Unlock()
		return h(ctx, req)
	}))
	inventoryv1.RegisterInventoryServiceServer(srv, f)
	orderv1.RegisterOrderServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	opts.Server = "passthrough:///bufconn"
	opts.DialOptions = append(opts.DialOptions, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		return lis.DialContext(ctx)
	}))
	fast := RetryPolicy{InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	if opts.Retry == (RetryPolicy{}) {
		opts.Retry = fast
	}
	if opts.StreamRetry == (RetryPolicy{}) {
		opts.StreamRetry = fast
	}
	c, err := Dial(context.Background(), opts)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestReserveRetriesWithTheSameKey(t *testing.T) {
	f := &fakeServer{
		fails:       []error{status.Error(codes.Unavailable, "restarting"), status.Error(codes.Canceled, "shutting down")},
		lostReplies: 1, // the third attempt is applied, its reply lost
	}
	var retries []RetryInfo
	c := startFake(t, f, Options{OnRetry: func(r RetryInfo) { retries = append(retries, r) }})
	res, err := c.Reserve(testCtx(t), []*inventoryv1.Line{NewLine("a", "", 2)}, ReserveOptions{})
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	if res.Attempts != 4 || !res.Replayed || res.Reply.GetReservation().GetReservationId() != "rsv-1" {
		t.Errorf("result = %d attempts, replayed %v, %v; want 4 attempts, replayed", res.Attempts, res.Replayed, res.Reply)
	}
	if len(retries) != 3 || retries[0].Method != "Reserve" || retries[2].Attempt != 3 || retries[1].IdempotencyKey != res.IdempotencyKey {
		t.Errorf("OnRetry calls = %+v, want 3 for attempts 1-3 with the key", retries)
	}
	if len(f.keys) != 4 {
		t.Fatalf("server saw %d attempts, want 4", len(f.keys))
	}
	for _, k := range f.keys {
		if k != res.IdempotencyKey || k == "" {
			t.Errorf("attempt keys %v: every attempt must send the result's key %q", f.keys, res.IdempotencyKey)
			break
		}
	}
}

func TestReserveKeepsTheCallersKey(t *testing.T) {
	f := &fakeServer{}
	c := startFake(t, f, Options{})
	res, err := c.Reserve(testCtx(t), []*inventoryv1.Line{NewLine("a", "", 1)}, ReserveOptions{IdempotencyKey: "order-17"})
	if err != nil || res.IdempotencyKey != "order-17" || f.keys[0] != "order-17" || res.Replayed {
		t.Fatalf("Reserve = %+v, %v; server keys %v", res, err, f.keys)
	}
	res, err = c.Reserve(testCtx(t), []*inventoryv1.Line{NewLine("a", "", 1)}, ReserveOptions{IdempotencyKey: "order-17"})
	if err != nil || !res.Replayed {
		t.Fatalf("the same key again: %+v, %v; want replayed", res, err)
	}
}

func TestReserveShortStockIsNotRetried(t *testing.T) {
	f := &fakeServer{fails: []error{status.Error(codes.FailedPrecondition, "insufficient stock")}}
	c := startFake(t, f, Options{})
	_, err := c.Reserve(testCtx(t), []*inventoryv1.Line{NewLine("a", "", 100)}, ReserveOptions{})
	var ce *CallError
	if !IsShortStock(err) || !errors.As(err, &ce) || ce.Attempts != 1 || len(f.keys) != 1 {
		t.Fatalf("err = %v; want one attempt, FAILED_PRECONDITION", err)
	}
}

func TestReserveGivesUpAfterMaxAttempts(t *testing.T) {
	down := status.Error(codes.Unavailable, "down")
	f := &fakeServer{fails: []error{down, down, down, down}}
	c := startFake(t, f, Options{Retry: RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond}})
	_, err := c.Reserve(testCtx(t), []*inventoryv1.Line{NewLine("a", "", 1)}, ReserveOptions{})
	var ce *CallError
	if status.Code(err) != codes.Unavailable || !errors.As(err, &ce) || ce.Attempts != 3 {
		t.Fatalf("err = %v; want UNAVAILABLE after 3 attempts", err)
	}
}

func TestReserveRejectsNoLines(t *testing.T) {
	c := startFake(t, &fakeServer{}, Options{})
	if _, err := c.Reserve(testCtx(t), nil, ReserveOptions{}); err == nil {
		t.Fatal("Reserve with no lines: want an error")
	}
}

func TestAdjustStockLeavesTheRequestAlone(t *testing.T) {
	f := &fakeServer{fails: []error{status.Error(codes.Unavailable, "down")}}
	c := startFake(t, f, Options{})
	req := &inventoryv1.AdjustStockRequest{Sku: "a", Mode: inventoryv1.AdjustMode_ADJUST_MODE_SET, Quantity: 5}
	res, err := c.AdjustStock(testCtx(t), req)
	if err != nil || res.Attempts != 2 || res.Reply.GetLevel().GetOnHand() != 5 {
		t.Fatalf("AdjustStock = %+v, %v", res, err)
	}
	if req.IdempotencyKey != "" {
		t.Errorf("the caller's request was modified: key %q", req.IdempotencyKey)
	}
	if len(f.keys) != 2 || f.keys[0] != res.IdempotencyKey || f.keys[1] != res.IdempotencyKey {
		t.Errorf("attempt keys %v, want twice %q", f.keys, res.IdempotencyKey)
	}
	if _, err := c.AdjustStock(testCtx(t), nil); err == nil {
		t.Error("AdjustStock(nil): want an error")
	}
}

func su(kind inventoryv1.StockUpdate_Kind, seq uint64) *inventoryv1.StockUpdate {
	return upd(kind, seq)
}

func TestWatchStockReconnectsWithoutGapOrDuplicate(t *testing.T) {
	f := &fakeServer{watchScripts: []streamScript[inventoryv1.StockUpdate]{
		{send: []*inventoryv1.StockUpdate{su(snap, 5), su(snap, 5), su(snapEnd, 5), su(change, 6), su(change, 8)},
			end: status.Error(codes.Unavailable, "server shutting down")},
		{send: []*inventoryv1.StockUpdate{su(change, 8), su(change, 9)}, end: status.Error(codes.Canceled, "shutdown")},
		{end: status.Error(codes.OutOfRange, "oldest retained: 15")},
		{send: []*inventoryv1.StockUpdate{su(snap, 20), su(snapEnd, 20), su(change, 21)}},
	}}
	c := startFake(t, f, Options{})
	var got []string
	var hooks []Reconnect
	err := c.WatchStock(testCtx(t), []*inventoryv1.StockKey{StockKey("a", "")}, func(u *inventoryv1.StockUpdate) error {
		got = append(got, u.GetKind().String()[5:]+":"+strconv.FormatUint(u.GetSequence(), 10))
		if u.GetSequence() == 21 {
			return ErrStop
		}
		return nil
	}, WithReconnectHook(func(r Reconnect) { hooks = append(hooks, r) }))
	if err != nil {
		t.Fatalf("WatchStock = %v, want nil after ErrStop", err)
	}
	want := []string{"SNAPSHOT:5", "SNAPSHOT:5", "SNAPSHOT_END:5", "CHANGE:6", "CHANGE:8", "CHANGE:9", "SNAPSHOT:20", "SNAPSHOT_END:20", "CHANGE:21"}
	if len(got) != len(want) {
		t.Fatalf("handler got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("handler got %v, want %v", got, want)
		}
	}
	type reqWant struct {
		resume uint64
		gap    bool
	}
	wantReqs := []reqWant{{0, false}, {8, false}, {9, false}, {9, true}}
	if len(f.watchReqs) != len(wantReqs) {
		t.Fatalf("%d WatchStock calls, want %d", len(f.watchReqs), len(wantReqs))
	}
	for i, w := range wantReqs {
		r := f.watchReqs[i]
		if r.GetResumeAfterSequence() != w.resume || r.GetSnapshotOnGap() != w.gap || len(r.GetKeys()) != 1 {
			t.Errorf("call %d: %v, want resume %d snapshot_on_gap %v", i+1, r, w.resume, w.gap)
		}
	}
	if len(hooks) != 3 || hooks[0].ResumeAfter != 8 || !hooks[2].Snapshot {
		t.Errorf("reconnect hooks = %+v", hooks)
	}
}

func TestWatchStockStopsOnRefusalAndOnContext(t *testing.T) {
	f := &fakeServer{watchScripts: []streamScript[inventoryv1.StockUpdate]{
		{end: status.Error(codes.InvalidArgument, "too many keys")},
	}}
	c := startFake(t, f, Options{})
	err := c.WatchStock(testCtx(t), nil, func(*inventoryv1.StockUpdate) error { return nil })
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("WatchStock = %v, want INVALID_ARGUMENT", err)
	}

	f = &fakeServer{watchScripts: []streamScript[inventoryv1.StockUpdate]{{send: []*inventoryv1.StockUpdate{su(snapEnd, 1)}}}}
	c = startFake(t, f, Options{})
	ctx, cancel := context.WithCancel(testCtx(t))
	err = c.WatchStock(ctx, nil, func(*inventoryv1.StockUpdate) error { cancel(); return nil })
	if !errors.Is(err, context.Canceled) || len(f.watchReqs) != 1 {
		t.Fatalf("WatchStock = %v after %d calls, want context.Canceled and no reconnection", err, len(f.watchReqs))
	}
}

func TestWatchStockBoundedReconnects(t *testing.T) {
	down := streamScript[inventoryv1.StockUpdate]{end: status.Error(codes.Unavailable, "down")}
	f := &fakeServer{watchScripts: []streamScript[inventoryv1.StockUpdate]{down, down, down, down}}
	c := startFake(t, f, Options{StreamRetry: RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond}})
	err := c.WatchStock(testCtx(t), nil, func(*inventoryv1.StockUpdate) error { return nil })
	if status.Code(err) != codes.Unavailable || len(f.watchReqs) != 3 {
		t.Fatalf("WatchStock = %v after %d calls, want UNAVAILABLE after 3", err, len(f.watchReqs))
	}
}

func TestFollowOrderUntilTerminal(t *testing.T) {
	o := func(s orderv1.OrderStatus, seq uint64) *orderv1.OrderStatusUpdate {
		return &orderv1.OrderStatusUpdate{OrderId: "o1", StatusCode: s, Sequence: seq}
	}
	f := &fakeServer{orderScripts: []streamScript[orderv1.OrderStatusUpdate]{
		{send: []*orderv1.OrderStatusUpdate{o(orderv1.OrderStatus_ORDER_STATUS_CONFIRMED, 4), o(orderv1.OrderStatus_ORDER_STATUS_PAID, 9)},
			end: status.Error(codes.Unavailable, "restart")},
		{send: []*orderv1.OrderStatusUpdate{o(orderv1.OrderStatus_ORDER_STATUS_PAID, 9), o(orderv1.OrderStatus_ORDER_STATUS_DELIVERED, 20)}},
	}}
	c := startFake(t, f, Options{})
	var got []orderv1.OrderStatus
	err := c.FollowOrder(testCtx(t), "o1", func(u *orderv1.OrderStatusUpdate) error {
		got = append(got, u.GetStatusCode())
		return nil
	})
	want := []orderv1.OrderStatus{orderv1.OrderStatus_ORDER_STATUS_CONFIRMED, orderv1.OrderStatus_ORDER_STATUS_PAID, orderv1.OrderStatus_ORDER_STATUS_DELIVERED}
	if err != nil || len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("FollowOrder = %v, statuses %v; want nil, %v", err, got, want)
	}
	// No script left: the fake answers NOT_FOUND, which ends FollowOrder.
	if err := c.FollowOrder(testCtx(t), "o2", func(*orderv1.OrderStatusUpdate) error { return nil }); status.Code(err) != codes.NotFound {
		t.Fatalf("FollowOrder(unknown) = %v, want NOT_FOUND", err)
	}
}

func TestTokenIsSent(t *testing.T) {
	f := &fakeServer{}
	c := startFake(t, f, Options{Token: "s3cret", AllowTokenWithoutTLS: true})
	if _, err := c.Reserve(testCtx(t), []*inventoryv1.Line{NewLine("a", "", 1)}, ReserveOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(f.authHeaders) != 1 || f.authHeaders[0] != "Bearer s3cret" {
		t.Fatalf("authorization headers = %v", f.authHeaders)
	}
}

func TestDialRefusesBadOptions(t *testing.T) {
	ctx := context.Background()
	for name, o := range map[string]Options{
		"no server":           {},
		"token without TLS":   {Server: "127.0.0.1:1", Token: "t"},
		"missing CA file":     {Server: "127.0.0.1:1", TLSCAFile: "/nonexistent/ca.pem"},
		"cert without a key":  {Server: "127.0.0.1:1", TLS: true, TLSCertFile: "c.pem"},
		"missing client cert": {Server: "127.0.0.1:1", TLSCertFile: "/nonexistent/c.pem", TLSKeyFile: "/nonexistent/k.pem"},
	} {
		if c, err := Dial(ctx, o); err == nil {
			c.Close()
			t.Errorf("%s: Dial succeeded, want an error", name)
		}
	}
}
