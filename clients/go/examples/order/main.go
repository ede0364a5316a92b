// Command order creates and moves orders through feedclient (each call retried under one
// idempotency key) and follows an order's status with feedclient.FollowOrder:
//
//	order create [--customer C] [--key K] [--hold-ttl D] SKU[@LOCATION]:QUANTITY...
//	order pay [--payment-ref P] [--key K] ORDER_ID
//	order advance [--details D] [--key K] ORDER_ID PACKING|DISPATCHED|DELIVERED
//	order cancel [--reason R] [--key K] ORDER_ID
//	order follow ORDER_ID
//
// The mutations print "order=ID status=S sequence=N replayed=BOOL attempts=K"; follow
// prints "seq=N order=ID status=S details=..." per update and exits 0 at a terminal status
// (DELIVERED, CANCELLED, EXPIRED), reconnecting across server restarts. Exit codes as for
// reserve.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"inventoryfeed/clients/go/examples/internal/cli"
	"inventoryfeed/clients/go/feedclient"
	"inventoryfeed/clients/go/gen/orderv1"
)

const prog = "order"

// command is one subcommand: its flags are registered on fs, run uses the parsed args.
type command struct {
	usage string
	flags func(fs *flag.FlagSet) func(ctx context.Context, c *feedclient.Client, args []string) error
}

var commands = map[string]command{
	"create":  {"[flags] SKU[@LOCATION]:QUANTITY...", createCmd},
	"pay":     {"[flags] ORDER_ID", payCmd},
	"advance": {"[flags] ORDER_ID PACKING|DISPATCHED|DELIVERED", advanceCmd},
	"cancel":  {"[flags] ORDER_ID", cancelCmd},
	"follow":  {"[flags] ORDER_ID", followCmd},
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintf(os.Stderr, "usage: %s create|pay|advance|cancel|follow [flags] ARGS...\n", prog)
		os.Exit(cli.ExitUsage)
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		cli.Fail(prog, cli.Usagef("unknown command %q (want create, pay, advance, cancel or follow)", os.Args[1]))
	}
	fs := flag.NewFlagSet(prog+" "+os.Args[1], flag.ExitOnError)
	conn := cli.RegisterConn(fs)
	defTimeout := time.Minute
	if os.Args[1] == "follow" {
		defTimeout = 0 // an order may take days to be delivered
	}
	timeout := fs.Duration("timeout", defTimeout, "overall deadline (0: none)")
	run := cmd.flags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s %s %s\n", prog, os.Args[1], cmd.usage)
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[2:])
	opts, err := conn.Options()
	if err != nil {
		cli.Fail(prog, cli.Usagef("%v", err))
	}
	opts.OnRetry = func(r feedclient.RetryInfo) {
		fmt.Fprintf(os.Stderr, "%s: %s attempt %d failed (%v); retrying in %v\n", prog, r.Method, r.Attempt, r.Err, r.Delay.Round(time.Millisecond))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	client, err := feedclient.Dial(ctx, opts)
	if err != nil {
		cli.Fail(prog, err)
	}
	defer client.Close()
	if err := run(ctx, client, fs.Args()); err != nil {
		cli.Fail(prog, err)
	}
}

func printOrder(res *feedclient.Result[*orderv1.OrderResponse]) {
	o := res.Reply.GetOrder()
	fmt.Printf("order=%s status=%s sequence=%d replayed=%t attempts=%d\n", o.GetOrderId(),
		strings.TrimPrefix(o.GetStatus().String(), "ORDER_STATUS_"), res.Reply.GetSequence(), res.Replayed, res.Attempts)
}

func createCmd(fs *flag.FlagSet) func(context.Context, *feedclient.Client, []string) error {
	customer := fs.String("customer", "go-example", "customer id")
	key := fs.String("key", "", "idempotency key (default: a new random key)")
	holdTTL := fs.Duration("hold-ttl", 0, "hold time to live of the order's stock (0: the server's default)")
	return func(ctx context.Context, c *feedclient.Client, args []string) error {
		if len(args) == 0 {
			return cli.Usagef("no line given")
		}
		req := &orderv1.CreateOrderRequest{CustomerId: *customer, IdempotencyKey: *key, HoldTtlMs: holdTTL.Milliseconds()}
		for _, a := range args {
			it, err := cli.ParseItem(a, ':')
			if err != nil {
				return cli.Usagef("%v", err)
			}
			req.Lines = append(req.Lines, &orderv1.OrderLine{Sku: it.SKU, Location: it.Location, Quantity: it.Quantity})
		}
		res, err := c.CreateOrder(ctx, req)
		if err != nil {
			return err
		}
		r := res.Reply
		fmt.Printf("order=%s status=%s sequence=%d replayed=%t attempts=%d reservation=%s\n",
			r.GetOrderId(), r.GetStatus(), r.GetSequence(), res.Replayed, res.Attempts, r.GetReservationId())
		return nil
	}
}

func payCmd(fs *flag.FlagSet) func(context.Context, *feedclient.Client, []string) error {
	ref := fs.String("payment-ref", "", "payment reference")
	key := fs.String("key", "", "idempotency key (default: a new random key)")
	return func(ctx context.Context, c *feedclient.Client, args []string) error {
		if len(args) != 1 {
			return cli.Usagef("want ORDER_ID")
		}
		res, err := c.PayOrder(ctx, &orderv1.PayOrderRequest{OrderId: args[0], PaymentReference: *ref, IdempotencyKey: *key})
		if err != nil {
			return err
		}
		printOrder(res)
		return nil
	}
}

func advanceCmd(fs *flag.FlagSet) func(context.Context, *feedclient.Client, []string) error {
	details := fs.String("details", "", "details kept with the status")
	key := fs.String("key", "", "idempotency key (default: a new random key)")
	return func(ctx context.Context, c *feedclient.Client, args []string) error {
		if len(args) != 2 {
			return cli.Usagef("want ORDER_ID STATUS")
		}
		v, ok := orderv1.OrderStatus_value["ORDER_STATUS_"+strings.ToUpper(args[1])]
		if !ok {
			return cli.Usagef("unknown status %q", args[1])
		}
		res, err := c.AdvanceOrder(ctx, &orderv1.AdvanceOrderRequest{
			OrderId: args[0], Target: orderv1.OrderStatus(v), Details: *details, IdempotencyKey: *key,
		})
		if err != nil {
			return err
		}
		printOrder(res)
		return nil
	}
}

func cancelCmd(fs *flag.FlagSet) func(context.Context, *feedclient.Client, []string) error {
	reason := fs.String("reason", "", "reason kept with the status")
	key := fs.String("key", "", "idempotency key (default: a new random key)")
	return func(ctx context.Context, c *feedclient.Client, args []string) error {
		if len(args) != 1 {
			return cli.Usagef("want ORDER_ID")
		}
		res, err := c.CancelOrder(ctx, &orderv1.CancelOrderRequest{OrderId: args[0], Reason: *reason, IdempotencyKey: *key})
		if err != nil {
			return err
		}
		printOrder(res)
		return nil
	}
}

func followCmd(fs *flag.FlagSet) func(context.Context, *feedclient.Client, []string) error {
	return func(ctx context.Context, c *feedclient.Client, args []string) error {
		if len(args) != 1 {
			return cli.Usagef("want ORDER_ID")
		}
		return c.FollowOrder(ctx, args[0], func(u *orderv1.OrderStatusUpdate) error {
			_, err := fmt.Fprintf(os.Stdout, "seq=%d order=%s status=%s details=%q\n",
				u.GetSequence(), u.GetOrderId(), u.GetStatus(), u.GetDetails())
			return err
		}, feedclient.WithOrderReconnectHook(func(r feedclient.Reconnect) {
			fmt.Fprintf(os.Stderr, "%s: stream ended (%v); reconnecting in %v\n", prog, r.Err, r.Delay.Round(time.Millisecond))
		}))
	}
}
