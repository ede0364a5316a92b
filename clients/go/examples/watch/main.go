// Command watch follows stock levels through feedclient.WatchStock and prints each update
// as one line:
//
//	seq=N sku=S location=L on_hand=H reserved=R available=A kind=snapshot|change [conflated=true]
//
// Snapshot rows carry the snapshot's sequence; the end of a snapshot and every
// reconnection are reported on stderr. It exits after --max-updates changes, after
// --idle-exit without an update, after the snapshot with --snapshot-only, or on SIGINT /
// SIGTERM.
package main

import (
	"context"
	"errors"
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

const prog = "watch"

var errIdle = errors.New("idle")

func main() {
	fs := flag.NewFlagSet(prog, flag.ExitOnError)
	conn := cli.RegisterConn(fs)
	var skus cli.List
	fs.Var(&skus, "sku", "SKU to watch (repeatable, or comma-separated); none: every level")
	location := fs.String("location", "", "location of the SKUs (empty: every location)")
	maxUpdates := fs.Int("max-updates", 0, "exit after this many changes (0: no limit; snapshot rows do not count)")
	idleExit := fs.Duration("idle-exit", 0, "exit after this long without an update (0: never)")
	snapshotOnly := fs.Bool("snapshot-only", false, "print the snapshot and exit")
	resumeAfter := fs.Uint64("resume-after", 0, "start with the changes after this sequence instead of a snapshot")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s [flags]\n", prog)
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		cli.Fail(prog, cli.Usagef("unexpected argument %q (SKUs go in --sku)", fs.Arg(0)))
	}
	if *snapshotOnly && *resumeAfter > 0 {
		cli.Fail(prog, cli.Usagef("--snapshot-only and --resume-after exclude each other"))
	}
	opts, err := conn.Options()
	if err != nil {
		cli.Fail(prog, cli.Usagef("%v", err))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	client, err := feedclient.Dial(ctx, opts)
	if err != nil {
		cli.Fail(prog, err)
	}
	defer client.Close()

	activity := watchIdle(ctx, *idleExit, cancel)
	keys := make([]*inventoryv1.StockKey, 0, len(skus))
	for _, s := range skus {
		keys = append(keys, feedclient.StockKey(s, *location))
	}
	p := &printer{maxChanges: *maxUpdates, snapshotOnly: *snapshotOnly}
	watchOpts := []feedclient.WatchOption{feedclient.WithReconnectHook(func(r feedclient.Reconnect) {
		what := fmt.Sprintf("resume after seq=%d", r.ResumeAfter)
		if r.Snapshot || r.ResumeAfter == 0 {
			what = "fresh snapshot"
		}
		fmt.Fprintf(os.Stderr, "%s: stream ended (%v); reconnecting in %v, %s\n", prog, r.Err, r.Delay.Round(time.Millisecond), what)
	})}
	if *resumeAfter > 0 {
		watchOpts = append(watchOpts, feedclient.WithResumeAfter(*resumeAfter))
	}
	err = client.WatchStock(ctx, keys, func(u *inventoryv1.StockUpdate) error {
		activity()
		return p.print(u)
	}, watchOpts...)

	switch {
	case err == nil:
		// --max-updates or --snapshot-only reached.
	case errors.Is(context.Cause(ctx), errIdle):
		fmt.Fprintf(os.Stderr, "%s: no update for %v, exiting after %d change(s)\n", prog, *idleExit, p.changes)
	case ctx.Err() != nil:
		// SIGINT / SIGTERM.
	default:
		cli.Fail(prog, err)
	}
}

// watchIdle cancels ctx with errIdle after d without activity; it returns the function
// that reports activity. d == 0: never.
func watchIdle(ctx context.Context, d time.Duration, cancel context.CancelCauseFunc) func() {
	if d <= 0 {
		return func() {}
	}
	kick := make(chan struct{}, 1)
	go func() {
		t := time.NewTimer(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-kick:
				if !t.Stop() {
					select {
					case <-t.C:
					default:
					}
				}
				t.Reset(d)
			case <-t.C:
				cancel(errIdle)
				return
			}
		}
	}()
	return func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
}

// printer writes the update lines and decides when to stop.
type printer struct {
	maxChanges   int
	snapshotOnly bool
	changes      int
	snapshotRows int
}

func (p *printer) print(u *inventoryv1.StockUpdate) error {
	switch u.GetKind() {
	case inventoryv1.StockUpdate_KIND_SNAPSHOT:
		p.snapshotRows++
		return writeLevel(u, "snapshot")
	case inventoryv1.StockUpdate_KIND_SNAPSHOT_END:
		fmt.Fprintf(os.Stderr, "%s: snapshot complete at seq=%d (%d level(s))\n", prog, u.GetSequence(), p.snapshotRows)
		p.snapshotRows = 0
		if p.snapshotOnly {
			return feedclient.ErrStop
		}
		return nil
	case inventoryv1.StockUpdate_KIND_CHANGE:
		if err := writeLevel(u, "change"); err != nil {
			return err
		}
		p.changes++
		if p.maxChanges > 0 && p.changes >= p.maxChanges {
			return feedclient.ErrStop
		}
		return nil
	default:
		fmt.Fprintf(os.Stderr, "%s: update of unknown kind %v at seq=%d skipped\n", prog, u.GetKind(), u.GetSequence())
		return nil
	}
}

// writeLevel writes one line with a single write (stdout is not buffered: each line is
// out as soon as it is printed).
func writeLevel(u *inventoryv1.StockUpdate, kind string) error {
	l := u.GetLevel()
	line := fmt.Sprintf("seq=%d sku=%s location=%s on_hand=%d reserved=%d available=%d kind=%s",
		u.GetSequence(), l.GetSku(), l.GetLocation(), l.GetOnHand(), l.GetReserved(), l.GetAvailable(), kind)
	if u.GetConflated() {
		line += " conflated=true"
	}
	_, err := fmt.Fprintln(os.Stdout, line)
	return err
}
