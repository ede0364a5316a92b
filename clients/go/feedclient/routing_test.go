package feedclient

// Cluster routing: the server's shard rules, and the client following feed-shard-owner
// between two in-process nodes (real gRPC over loopback).

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"inventoryfeed/clients/go/gen/inventoryv1"
	"inventoryfeed/clients/go/gen/orderv1"
)

func TestShardRulesAreTheServers(t *testing.T) {
	// The reference values of the server's unit tests (tests/unit/cluster_ledger_test.cc).
	for sku, want := range map[string]int{"sku-1": 4, "SKU-000042": 7, "\u00c4\u00d6-1": 9} {
		if got := ShardOfSKU(sku, 12); got != want {
			t.Errorf("ShardOfSKU(%q) = %d, want %d", sku, got, want)
		}
	}
	if s, ok := ShardOfID("rsv-s3-17"); !ok || s != 3 {
		t.Errorf("rsv-s3-17: %d %v", s, ok)
	}
	if s, ok := ShardOfID("ord-s11-1"); !ok || s != 11 {
		t.Errorf("ord-s11-1: %d %v", s, ok)
	}
	for _, bad := range []string{"r-1", "rsv-abc123-5", "rsv-s-5", "rsv-s3", "rsv-s3x-1", "rsv-s03-1", ""} {
		if _, ok := ShardOfID(bad); ok {
			t.Errorf("ShardOfID(%q) should name no shard", bad)
		}
	}
}

func TestARequestGoesToTheOneShardOfItsSkusOrItsID(t *testing.T) {
	one := &inventoryv1.ReserveRequest{Lines: []*inventoryv1.Line{{Sku: "sku-1"}, {Sku: "sku-1"}}}
	if s, ok := shardOfRequest(one, 12); !ok || s != 4 {
		t.Errorf("reserve: %d %v", s, ok)
	}
	other := "sku-2"
	for i := 2; ShardOfSKU(other, 12) == 4; i++ {
		other = fmt.Sprintf("sku-%d", i)
	}
	two := &inventoryv1.ReserveRequest{Lines: []*inventoryv1.Line{{Sku: "sku-1"}, {Sku: other}}}
	if _, ok := shardOfRequest(two, 12); ok {
		t.Error("two shards: the server should answer for itself")
	}
	if s, ok := shardOfRequest(&inventoryv1.AdjustStockRequest{Sku: "SKU-000042"}, 12); !ok || s != 7 {
		t.Errorf("adjust: %d %v", s, ok)
	}
	if s, ok := shardOfRequest(&inventoryv1.GetStockRequest{Sku: []string{"sku-1"}}, 12); !ok || s != 4 {
		t.Errorf("get stock: %d %v", s, ok)
	}
	if s, ok := shardOfRequest(&inventoryv1.CommitRequest{ReservationId: "rsv-s5-9"}, 12); !ok || s != 5 {
		t.Errorf("commit: %d %v", s, ok)
	}
	if _, ok := shardOfRequest(&inventoryv1.CommitRequest{ReservationId: "rsv-s15-9"}, 12); ok {
		t.Error("a shard beyond the count names none")
	}
	if s, ok := shardOfRequest(&orderv1.PayOrderRequest{OrderId: "ord-s2-3"}, 12); !ok || s != 2 {
		t.Errorf("pay: %d %v", s, ok)
	}
	if s, ok := shardOfRequest(&orderv1.CreateOrderRequest{ItemIds: []string{"sku-1"}}, 12); !ok || s != 4 {
		t.Errorf("create order: %d %v", s, ok)
	}
}

// clusterNode serves the shards in serves; for the others it answers UNAVAILABLE naming owner.
type clusterNode struct {
	inventoryv1.UnimplementedInventoryServiceServer
	serves  map[int]bool
	owner   func() string
	address string

	mu                        sync.Mutex
	reserves, redirects, maps int
}

func (n *clusterNode) GetShardMap(context.Context, *inventoryv1.GetShardMapRequest) (*inventoryv1.GetShardMapResponse, error) {
	n.mu.Lock()
	n.maps++
	n.mu.Unlock()
	reply := &inventoryv1.GetShardMapResponse{ShardCount: 12}
	for s := 0; s < 12; s++ {
		address := n.owner()
		if n.serves[s] {
			address = n.address
		}
		reply.Shards = append(reply.Shards, &inventoryv1.ShardOwner{Shard: uint32(s), Epoch: 1, NodeId: address, Address: address})
	}
	return reply, nil
}

func (n *clusterNode) Reserve(ctx context.Context, req *inventoryv1.ReserveRequest) (*inventoryv1.ReserveResponse, error) {
	shard := ShardOfSKU(req.GetLines()[0].GetSku(), 12)
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.serves[shard] {
		n.redirects++
		grpc.SetTrailer(ctx, metadata.Pairs(OwnerMetadata, n.owner()))
		return nil, status.Errorf(codes.Unavailable, "shard %d is served elsewhere", shard)
	}
	n.reserves++
	return &inventoryv1.ReserveResponse{Reservation: &inventoryv1.Reservation{
		ReservationId: fmt.Sprintf("rsv-s%d-%d", shard, n.reserves)}}, nil
}

func (n *clusterNode) WatchStock(req *inventoryv1.WatchStockRequest, stream inventoryv1.InventoryService_WatchStockServer) error {
	sku := req.GetKeys()[0].GetSku()
	shard := ShardOfSKU(sku, 12)
	n.mu.Lock()
	if !n.serves[shard] {
		n.redirects++
		n.mu.Unlock()
		stream.SetTrailer(metadata.Pairs(OwnerMetadata, n.owner()))
		return status.Errorf(codes.Unavailable, "shard %d is served elsewhere", shard)
	}
	n.mu.Unlock()
	level := &inventoryv1.StockLevel{Sku: sku, OnHand: 5, Available: 5}
	for _, u := range []*inventoryv1.StockUpdate{
		{Kind: inventoryv1.StockUpdate_KIND_SNAPSHOT, Level: level, Sequence: 7},
		{Kind: inventoryv1.StockUpdate_KIND_SNAPSHOT_END, Sequence: 7},
		{Kind: inventoryv1.StockUpdate_KIND_CHANGE, Level: level, Sequence: 8},
	} {
		if err := stream.Send(u); err != nil {
			return err
		}
	}
	<-stream.Context().Done()
	return nil
}

func (n *clusterNode) counts() [3]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return [3]int{n.reserves, n.redirects, n.maps}
}

// twoNodes: a serves shard 4 only ("sku-1"), b every other shard; each names the other as
// owner. A client dialed to a, and a SKU of b's.
func twoNodes(t *testing.T) (a, b *clusterNode, c *Client, other string) {
	nodes := map[string]*clusterNode{}
	a = &clusterNode{serves: map[int]bool{4: true}, owner: func() string { return nodes["b"].address }}
	b = &clusterNode{serves: map[int]bool{}, owner: func() string { return nodes["a"].address }}
	for s := 0; s < 12; s++ {
		b.serves[s] = s != 4
	}
	nodes["a"], nodes["b"] = a, b
	for _, n := range []*clusterNode{a, b} {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		n.address = lis.Addr().String()
		srv := grpc.NewServer()
		inventoryv1.RegisterInventoryServiceServer(srv, n)
		go srv.Serve(lis)
		t.Cleanup(srv.Stop)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, Options{Server: a.address})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	other = "sku-2"
	for i := 2; ShardOfSKU(other, 12) == 4; i++ {
		other = fmt.Sprintf("sku-%d", i)
	}
	return a, b, c, other
}

func TestTheClientFollowsTheOwnerThenRoutesByTheMap(t *testing.T) {
	a, b, c, other := twoNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	first, err := c.Reserve(ctx, []*inventoryv1.Line{NewLine(other, "", 1)}, ReserveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("rsv-s%d-", ShardOfSKU(other, 12)); first.Reply.GetReservation().GetReservationId()[:len(want)] != want {
		t.Errorf("reservation %s, want prefix %s", first.Reply.GetReservation().GetReservationId(), want)
	}
	if first.Attempts != 1 {
		t.Errorf("following the owner is not a retry: %d attempts", first.Attempts)
	}
	if got := a.counts(); got != [3]int{0, 1, 0} {
		t.Errorf("a (reserves, redirects, maps) = %v", got)
	}
	// Known now: straight to b, and sku-1 straight to a; the raw stub routes too.
	if _, err := c.Reserve(ctx, []*inventoryv1.Line{NewLine(other, "", 1)}, ReserveOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Inventory.Reserve(ctx, &inventoryv1.ReserveRequest{Lines: []*inventoryv1.Line{NewLine("sku-1", "", 1)}}); err != nil {
		t.Fatal(err)
	}
	if got := a.counts(); got != [3]int{1, 1, 0} {
		t.Errorf("a (reserves, redirects, maps) = %v", got)
	}
	if got := b.counts(); got != [3]int{2, 0, 1} {
		t.Errorf("b (reserves, redirects, maps) = %v", got)
	}
}

func TestAStreamOpensOnItsShardsOwner(t *testing.T) {
	a, b, c, other := twoNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var reconnects []Reconnect
	var last uint64
	err := c.WatchStock(ctx, []*inventoryv1.StockKey{{Sku: other}}, func(u *inventoryv1.StockUpdate) error {
		if u.GetKind() == inventoryv1.StockUpdate_KIND_CHANGE {
			last = u.GetSequence()
			return ErrStop
		}
		return nil
	}, WithReconnectHook(func(r Reconnect) { reconnects = append(reconnects, r) }))
	if err != nil {
		t.Fatal(err)
	}
	if last != 8 {
		t.Errorf("last change %d, want 8", last)
	}
	if len(reconnects) != 1 {
		t.Errorf("reopened %d times, want once (on the owner a named)", len(reconnects))
	}
	if got := a.counts(); got[1] != 1 {
		t.Errorf("a redirected %d times", got[1])
	}
	if got := b.counts(); got[2] != 1 {
		t.Errorf("b answered %d shard maps", got[2])
	}
}
