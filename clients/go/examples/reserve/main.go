// Command reserve holds stock through feedclient.Reserve: all lines or none, retried after
// UNAVAILABLE / DEADLINE_EXCEEDED with the same idempotency key, so a retry never holds
// twice. It prints
//
//	reservation=ID sequence=N replayed=BOOL attempts=K key=KEY
//	level seq=N sku=S location=L on_hand=H reserved=R available=A     (one per level)
//
// Exit codes: 0 held, 1 usage, 2 refused by the server (e.g. FAILED_PRECONDITION: not
// enough stock), 3 unavailable after the retries.
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

const prog = "reserve"

func main() {
	fs := flag.NewFlagSet(prog, flag.ExitOnError)
	conn := cli.RegisterConn(fs)
	key := fs.String("key", "", "idempotency key (default: a new random key); reuse it to retry safely")
	ttl := fs.Duration("ttl", 0, "hold time to live (0: the server's default)")
	reservationID := fs.String("reservation-id", "", "client-chosen reservation id")
	orderID := fs.String("order-id", "", "order id to record on the hold")
	attempts := fs.Int("attempts", feedclient.DefaultRetry.MaxAttempts, "attempts in all, the first included")
	attemptTimeout := fs.Duration("attempt-timeout", feedclient.DefaultRetry.AttemptTimeout, "timeout of one attempt")
	backoff := fs.Duration("backoff", feedclient.DefaultRetry.InitialBackoff, "wait before the first retry (doubles, jittered)")
	maxBackoff := fs.Duration("max-backoff", feedclient.DefaultRetry.MaxBackoff, "longest wait between attempts")
	timeout := fs.Duration("timeout", time.Minute, "overall deadline")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s [flags] SKU[@LOCATION]:QUANTITY...\n", prog)
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() == 0 {
		fs.Usage()
		cli.Fail(prog, cli.Usagef("no line given"))
	}
	lines := make([]*inventoryv1.Line, 0, fs.NArg())
	for _, arg := range fs.Args() {
		it, err := cli.ParseItem(arg, ':')
		if err != nil {
			cli.Fail(prog, cli.Usagef("%v", err))
		}
		lines = append(lines, feedclient.NewLine(it.SKU, it.Location, it.Quantity))
	}
	opts, err := conn.Options()
	if err != nil {
		cli.Fail(prog, cli.Usagef("%v", err))
	}
	opts.Retry = feedclient.RetryPolicy{
		MaxAttempts:    *attempts,
		InitialBackoff: *backoff,
		MaxBackoff:     *maxBackoff,
		AttemptTimeout: *attemptTimeout,
	}
	opts.OnRetry = func(r feedclient.RetryInfo) {
		fmt.Fprintf(os.Stderr, "%s: attempt %d failed (%v); retrying in %v with key %s\n",
			prog, r.Attempt, r.Err, r.Delay.Round(time.Millisecond), r.IdempotencyKey)
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

	res, err := client.Reserve(ctx, lines, feedclient.ReserveOptions{
		IdempotencyKey: *key,
		TTL:            *ttl,
		ReservationID:  *reservationID,
		OrderID:        *orderID,
	})
	if err != nil {
		cli.Fail(prog, err)
	}
	r := res.Reply
	fmt.Printf("reservation=%s sequence=%d replayed=%t attempts=%d key=%s\n",
		r.GetReservation().GetReservationId(), r.GetSequence(), res.Replayed, res.Attempts, res.IdempotencyKey)
	for _, l := range r.GetLevels() {
		fmt.Printf("level seq=%d sku=%s location=%s on_hand=%d reserved=%d available=%d\n",
			l.GetSequence(), l.GetSku(), l.GetLocation(), l.GetOnHand(), l.GetReserved(), l.GetAvailable())
	}
}
