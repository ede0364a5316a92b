package feedclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"inventoryfeed/clients/go/gen/inventoryv1"
	"inventoryfeed/clients/go/gen/orderv1"
)

// Client is a connection to the feed server with its typed helpers. The generated stubs
// are there for every other call.
type Client struct {
	// Inventory is the generated InventoryService stub (no retries of its own).
	Inventory inventoryv1.InventoryServiceClient
	// Orders is the generated OrderService stub (no retries of its own).
	Orders orderv1.OrderServiceClient

	conn        *grpc.ClientConn
	router      *router
	retry       RetryPolicy
	streamRetry RetryPolicy
	onRetry     func(RetryInfo)
}

// Dial opens a client connection. The connection is made in the background (calls wait
// for it or fail with UNAVAILABLE, which the helpers retry); with Options.WaitReady, Dial
// waits until it is up or ctx ends.
func Dial(ctx context.Context, opts Options) (*Client, error) {
	if opts.Server == "" {
		return nil, errors.New("feedclient: Options.Server is empty (want host:port)")
	}
	creds, err := transportCredentials(opts)
	if err != nil {
		return nil, err
	}
	dialOpts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		// Quicker reconnection than gRPC's default (1 s, then growing to 2 min): a
		// restarted server is found again within a few hundred milliseconds.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  100 * time.Millisecond,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   3 * time.Second,
			},
			MinConnectTimeout: 5 * time.Second,
		}),
	}
	if opts.Token != "" {
		tlsOn := creds.Info().SecurityProtocol == "tls"
		if !tlsOn && !opts.AllowTokenWithoutTLS {
			return nil, errors.New("feedclient: a Token needs TLS (set TLSCAFile or TLS), or set AllowTokenWithoutTLS for development")
		}
		dialOpts = append(dialOpts, grpc.WithPerRPCCredentials(bearerToken{token: opts.Token, requireTLS: tlsOn}))
	}
	if opts.UserAgent != "" {
		dialOpts = append(dialOpts, grpc.WithUserAgent(opts.UserAgent))
	}
	dialOpts = append(dialOpts, opts.DialOptions...)
	// Cluster mode: the other nodes are dialed like this one, without the interceptor (it
	// follows the owner itself).
	rt := newRouter(opts.Server, dialOpts)
	dialOpts = append(dialOpts, grpc.WithChainUnaryInterceptor(rt.intercept))

	conn, err := grpc.NewClient(opts.Server, dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("feedclient: dial %s: %w", opts.Server, err)
	}
	c := &Client{
		Inventory:   inventoryv1.NewInventoryServiceClient(conn),
		Orders:      orderv1.NewOrderServiceClient(conn),
		conn:        conn,
		router:      rt,
		retry:       opts.Retry.withDefaults(DefaultRetry),
		streamRetry: opts.StreamRetry.withDefaults(DefaultStreamRetry),
		onRetry:     opts.OnRetry,
	}
	conn.Connect()
	if opts.WaitReady {
		if err := waitReady(ctx, conn); err != nil {
			conn.Close()
			return nil, fmt.Errorf("feedclient: dial %s: %w", opts.Server, err)
		}
	}
	return c, nil
}

// Conn is the underlying gRPC connection (for other stubs on the same server).
func (c *Client) Conn() *grpc.ClientConn { return c.conn }

// Close closes the connection (and those to other cluster nodes); calls in flight end with
// CANCELLED.
func (c *Client) Close() error {
	c.router.close()
	return c.conn.Close()
}

func waitReady(ctx context.Context, conn *grpc.ClientConn) error {
	for {
		s := conn.GetState()
		if s == connectivity.Ready {
			return nil
		}
		if s == connectivity.Idle {
			conn.Connect()
		}
		if !conn.WaitForStateChange(ctx, s) {
			return fmt.Errorf("not ready (%v): %w", s, ctx.Err())
		}
	}
}

func transportCredentials(opts Options) (credentials.TransportCredentials, error) {
	useTLS := opts.TLS || opts.TLSCAFile != "" || opts.TLSCertFile != ""
	if !useTLS {
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: opts.TLSServerName}
	if opts.TLSCAFile != "" {
		pem, err := os.ReadFile(opts.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("feedclient: TLS CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("feedclient: TLS CA file %s holds no PEM certificate", opts.TLSCAFile)
		}
		cfg.RootCAs = pool
	}
	if (opts.TLSCertFile == "") != (opts.TLSKeyFile == "") {
		return nil, errors.New("feedclient: TLSCertFile and TLSKeyFile go together")
	}
	if opts.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(opts.TLSCertFile, opts.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("feedclient: client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(cfg), nil
}
