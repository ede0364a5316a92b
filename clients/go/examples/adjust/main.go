// Command adjust changes stock levels through feedclient.AdjustStock, one call per
// argument, in order, each retried with its own idempotency key. It prints one line per
// change:
//
//	seq=N sku=S location=L on_hand=H reserved=R available=A replayed=BOOL attempts=K
//
// Exit codes as for reserve.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"inventoryfeed/clients/go/examples/internal/cli"
	"inventoryfeed/clients/go/feedclient"
	"inventoryfeed/clients/go/gen/inventoryv1"
)

const prog = "adjust"

func main() {
	fs := flag.NewFlagSet(prog, flag.ExitOnError)
	conn := cli.RegisterConn(fs)
	set := fs.Bool("set", false, "set on_hand to QUANTITY (default: add QUANTITY, which may be negative)")
	reason := fs.String("reason", "", "reason kept in the event")
	key := fs.String("key", "", "idempotency key (only with a single argument; default: a new random key)")
	timeout := fs.Duration("timeout", time.Minute, "overall deadline")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s [flags] SKU[@LOCATION]=QUANTITY...\n", prog)
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() == 0 {
		fs.Usage()
		cli.Fail(prog, cli.Usagef("no change given"))
	}
	if *key != "" && fs.NArg() > 1 {
		cli.Fail(prog, cli.Usagef("--key goes with a single change"))
	}
	items := make([]cli.Item, 0, fs.NArg())
	for _, arg := range fs.Args() {
		it, err := cli.ParseItem(arg, '=')
		if err != nil {
			cli.Fail(prog, cli.Usagef("%v", err))
		}
		items = append(items, it)
	}
	opts, err := conn.Options()
	if err != nil {
		cli.Fail(prog, cli.Usagef("%v", err))
	}
	opts.OnRetry = func(r feedclient.RetryInfo) {
		fmt.Fprintf(os.Stderr, "%s: attempt %d failed (%v); retrying in %v\n", prog, r.Attempt, r.Err, r.Delay.Round(time.Millisecond))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	client, err := feedclient.Dial(ctx, opts)
	if err != nil {
		cli.Fail(prog, err)
	}
	defer client.Close()

	mode := inventoryv1.AdjustMode_ADJUST_MODE_DELTA
	if *set {
		mode = inventoryv1.AdjustMode_ADJUST_MODE_SET
	}
	for _, it := range items {
		res, err := client.AdjustStock(ctx, &inventoryv1.AdjustStockRequest{
			Sku: it.SKU, Location: it.Location, Mode: mode, Quantity: it.Quantity,
			Reason: *reason, IdempotencyKey: *key,
		})
		if err != nil {
			cli.Fail(prog, err)
		}
		l := res.Reply.GetLevel()
		fmt.Printf("seq=%d sku=%s location=%s on_hand=%d reserved=%d available=%d replayed=%t attempts=%d\n",
			res.Reply.GetSequence(), l.GetSku(), l.GetLocation(), l.GetOnHand(), l.GetReserved(), l.GetAvailable(),
			res.Replayed, res.Attempts)
	}
}
