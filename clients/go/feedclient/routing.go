package feedclient

// Cluster mode (the server's docs/CLUSTER.md): a node that does not serve a call's shard
// answers UNAVAILABLE with the owner's "host:port" in the trailing metadata
// feed-shard-owner. The client's unary interceptor calls the owner at once (within the same
// attempt), learns the shard map (GetShardMap) and then sends each unary call of a known shard
// straight to its owner, over a connection dialed like the client's own. It serves the typed
// helpers and the raw stubs alike; streams are not served in cluster mode yet.

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"inventoryfeed/clients/go/gen/inventoryv1"
)

// OwnerMetadata is the trailing metadata naming the node that serves a shard.
const OwnerMetadata = "feed-shard-owner"

// maxRedirects bounds how often one attempt follows OwnerMetadata (a shard moving again).
const maxRedirects = 3

// ShardOfSKU is the server's rule: 64-bit FNV-1a of the SKU's UTF-8 bytes, mod shardCount.
func ShardOfSKU(sku string, shardCount int) int {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(sku); i++ {
		h ^= uint64(sku[i])
		h *= 0x100000001b3
	}
	return int(h % uint64(shardCount))
}

// ShardOfID is the shard a cluster-generated id names ("rsv-s3-17", "ord-s3-17" -> 3).
func ShardOfID(id string) (int, bool) {
	for _, prefix := range []string{"rsv-s", "ord-s"} {
		rest, ok := strings.CutPrefix(id, prefix)
		if !ok {
			continue
		}
		digits, tail, found := strings.Cut(rest, "-")
		if !found || tail == "" || digits == "" {
			return 0, false
		}
		n, err := strconv.Atoi(digits)
		if err != nil || n < 0 || strconv.Itoa(n) != digits {
			return 0, false
		}
		return n, true
	}
	return 0, false
}

// shardOfRequest: the one shard the request's SKUs are on, else the shard its id names.
func shardOfRequest(msg proto.Message, shardCount int) (int, bool) {
	m := msg.ProtoReflect()
	fields := m.Descriptor().Fields()
	var skus []string
	addSku := func(s string) {
		if s != "" {
			skus = append(skus, s)
		}
	}
	for _, name := range []protoreflect.Name{"lines", "keys"} {
		if f := fields.ByName(name); f != nil && f.IsList() && f.Message() != nil {
			list := m.Get(f).List()
			for i := 0; i < list.Len(); i++ {
				inner := list.Get(i).Message()
				if sku := inner.Descriptor().Fields().ByName("sku"); sku != nil {
					addSku(inner.Get(sku).String())
				}
			}
		}
	}
	for _, name := range []protoreflect.Name{"item_ids", "sku"} {
		f := fields.ByName(name)
		if f == nil || f.Kind() != protoreflect.StringKind {
			continue
		}
		if f.IsList() {
			list := m.Get(f).List()
			for i := 0; i < list.Len(); i++ {
				addSku(list.Get(i).String())
			}
		} else {
			addSku(m.Get(f).String())
		}
	}
	if len(skus) > 0 {
		shard := ShardOfSKU(skus[0], shardCount)
		for _, s := range skus[1:] {
			if ShardOfSKU(s, shardCount) != shard {
				return 0, false // several shards: the server answers for itself
			}
		}
		return shard, true
	}
	for _, name := range []protoreflect.Name{"reservation_id", "order_id"} {
		if f := fields.ByName(name); f != nil && f.Kind() == protoreflect.StringKind && !f.IsList() {
			if shard, ok := ShardOfID(m.Get(f).String()); ok && shard < shardCount {
				return shard, true
			}
		}
	}
	return 0, false
}

// router is the client's unary interceptor, the stream helpers' routing (WatchStock,
// FollowOrder) and its connections to the other nodes.
type router struct {
	self     string
	dialOpts []grpc.DialOption

	mu         sync.Mutex
	conns      map[string]*grpc.ClientConn
	shardCount int
	owners     map[int]string
}

func newRouter(self string, dialOpts []grpc.DialOption) *router {
	return &router{self: self, dialOpts: dialOpts, conns: map[string]*grpc.ClientConn{}, owners: map[int]string{}}
}

func (r *router) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	msg, _ := req.(proto.Message)
	address, target := r.target(msg, cc)
	for hops := 0; ; hops++ {
		var trailer metadata.MD
		err := invoker(ctx, method, req, reply, target, append(opts, grpc.Trailer(&trailer))...)
		owner, conn, ok := r.observe(ctx, msg, address, err, trailer)
		if !ok || hops == maxRedirects {
			return err
		}
		address, target = owner, conn
	}
}

// target is where msg goes: its shard's known owner, else the address the client was given.
func (r *router) target(msg proto.Message, self *grpc.ClientConn) (string, *grpc.ClientConn) {
	if owner, ok := r.ownerFor(msg); ok && owner != r.self {
		if conn, err := r.conn(owner); err == nil {
			return owner, conn
		}
	}
	return r.self, self
}

// observe reads how a call of msg to address ended. A wrong-node answer names the owner:
// learned, and returned to go there now (ok). An owner that no longer answers (UNAVAILABLE
// without a name) is forgotten: the next attempt asks the address the client was given,
// which names the new one.
func (r *router) observe(ctx context.Context, msg proto.Message, address string, err error,
	trailer metadata.MD) (string, *grpc.ClientConn, bool) {
	if err == nil || status.Code(err) != codes.Unavailable {
		return "", nil, false
	}
	owner := trailer.Get(OwnerMetadata)
	if len(owner) == 0 || owner[0] == address {
		if address != r.self {
			r.forget(msg, address)
		}
		return "", nil, false
	}
	conn, dialErr := r.conn(owner[0])
	if dialErr != nil {
		return "", nil, false
	}
	r.learn(ctx, msg, owner[0], conn)
	return owner[0], conn, true
}

func (r *router) forget(msg proto.Message, address string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shardCount == 0 || msg == nil {
		return
	}
	if shard, ok := shardOfRequest(msg, r.shardCount); ok && r.owners[shard] == address {
		delete(r.owners, shard)
	}
}

func (r *router) ownerFor(msg proto.Message) (string, bool) {
	if msg == nil {
		return "", false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shardCount == 0 {
		return "", false
	}
	shard, ok := shardOfRequest(msg, r.shardCount)
	if !ok {
		return "", false
	}
	owner, ok := r.owners[shard]
	return owner, ok
}

// learn records that owner serves msg's shard; the first time, the whole map too.
func (r *router) learn(ctx context.Context, msg proto.Message, owner string, conn *grpc.ClientConn) {
	r.mu.Lock()
	known := r.shardCount > 0
	r.mu.Unlock()
	if !known {
		m, err := inventoryv1.NewInventoryServiceClient(conn).GetShardMap(ctx, &inventoryv1.GetShardMapRequest{})
		if err != nil {
			return // the redirect itself still goes to the owner
		}
		r.mu.Lock()
		r.shardCount = int(m.GetShardCount())
		for _, s := range m.GetShards() {
			if s.GetEpoch() > 0 {
				r.owners[int(s.GetShard())] = s.GetAddress()
			}
		}
		r.mu.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shardCount > 0 && msg != nil {
		if shard, ok := shardOfRequest(msg, r.shardCount); ok {
			r.owners[shard] = owner
		}
	}
}

func (r *router) conn(address string) (*grpc.ClientConn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.conns[address]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(address, r.dialOpts...)
	if err != nil {
		return nil, err
	}
	r.conns[address] = c
	return c, nil
}

func (r *router) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = map[string]*grpc.ClientConn{}
}

// routedRecv is stream.Recv that tells the router how the stream ended, so that the
// reconnection opens on the owner the node named (or asks again when the owner is gone).
func routedRecv[M any](ctx context.Context, r *router, req proto.Message, address string,
	stream interface {
		Recv() (M, error)
		Trailer() metadata.MD
	}) func() (M, error) {
	return func() (M, error) {
		m, err := stream.Recv()
		if err != nil {
			r.observe(ctx, req, address, err, stream.Trailer())
		}
		return m, err
	}
}
