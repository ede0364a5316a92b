// Command kafka-consumer reads the feed server's Kafka topics (stock changes, order
// status, receipts), decodes each record as an events.v1.Event, drops the duplicates of
// the relay's at-least-once delivery by event_id, and prints one line per event:
//
//	seq=N id=EVENT_ID key=KEY type=TYPE topic=T partition=P offset=O
//
// It uses github.com/twmb/franz-go (pure Go, no cgo). It reads from the start of the
// topics without a consumer group unless --group is given, and exits when every sequence
// 1..--until-sequence has been seen, after --max-events events, after --idle-exit without
// a new event, or on SIGINT / SIGTERM.
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

	"github.com/twmb/franz-go/pkg/kgo"

	"inventoryfeed/clients/go/examples/internal/cli"
)

const prog = "kafka-consumer"

var errIdle = errors.New("idle")

func main() {
	fs := flag.NewFlagSet(prog, flag.ExitOnError)
	var brokers, topics cli.List
	fs.Var(&brokers, "brokers", "bootstrap brokers (repeatable or comma-separated; default $KAFKA_BROKERS, else 127.0.0.1:19092)")
	fs.Var(&topics, "topics", "topics (repeatable or comma-separated; default the server's: inventory.stock.v1, orders.status.v1, orders.receipts.v1)")
	group := fs.String("group", "", "consumer group (default: none, read every partition from the start)")
	fromEnd := fs.Bool("from-end", false, "without a committed offset, start at the end instead of the start")
	until := fs.Uint64("until-sequence", 0, "exit once every sequence 1..N has been seen (0: no)")
	maxEvents := fs.Int("max-events", 0, "exit after this many distinct events (0: no limit)")
	idleExit := fs.Duration("idle-exit", 0, "exit after this long without a new event (0: never)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s [flags]\n", prog)
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		cli.Fail(prog, cli.Usagef("unexpected argument %q", fs.Arg(0)))
	}
	if len(brokers) == 0 {
		_ = brokers.Set(envOr("KAFKA_BROKERS", "127.0.0.1:19092"))
	}
	if len(topics) == 0 {
		topics = cli.List{"inventory.stock.v1", "orders.status.v1", "orders.receipts.v1"}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	start := kgo.NewOffset().AtStart()
	if *fromEnd {
		start = kgo.NewOffset().AtEnd()
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ClientID(prog),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(start),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}
	if *group != "" {
		opts = append(opts, kgo.ConsumerGroup(*group))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		cli.Fail(prog, cli.Usagef("kafka client: %v", err))
	}
	defer client.Close()

	c := &consumer{dedup: newDedup(*until), maxEvents: *maxEvents}
	idle := newIdleTimer(*idleExit)
	for !c.done() {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fetches := client.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			break
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				fmt.Fprintf(os.Stderr, "%s: fetch %s/%d: %v\n", prog, topic, partition, err)
			}
		})
		before := c.dedup.unique()
		fetches.EachRecord(c.handle)
		if c.dedup.unique() > before {
			idle.reset()
		} else if idle.expired() {
			cancel(errIdle)
		}
	}
	if *group != "" {
		// Commit what was printed before leaving the group.
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := client.CommitUncommittedOffsets(cctx); err != nil {
			fmt.Fprintf(os.Stderr, "%s: commit offsets: %v\n", prog, err)
		}
		ccancel()
	}
	fmt.Fprintf(os.Stderr, "%s: %d event(s), %d duplicate(s) dropped, %d undecodable record(s)\n",
		prog, c.dedup.unique(), c.duplicates, c.bad)
	if errors.Is(context.Cause(ctx), errIdle) {
		fmt.Fprintf(os.Stderr, "%s: no new event for %v\n", prog, *idleExit)
		if *until > 0 && !c.dedup.complete() {
			fmt.Fprintf(os.Stderr, "%s: sequences 1..%d not all seen\n", prog, *until)
			os.Exit(1)
		}
	}
}

// consumer prints each new event once.
type consumer struct {
	dedup      *dedup
	maxEvents  int
	duplicates int
	bad        int
}

func (c *consumer) done() bool {
	return c.dedup.complete() || (c.maxEvents > 0 && c.dedup.unique() >= c.maxEvents)
}

func (c *consumer) handle(r *kgo.Record) {
	if c.done() {
		return
	}
	hs := make([]header, len(r.Headers))
	for i, h := range r.Headers {
		hs[i] = header{Key: h.Key, Value: h.Value}
	}
	ev, err := decodeEvent(r.Value, hs)
	if err != nil {
		c.bad++
		fmt.Fprintf(os.Stderr, "%s: %s/%d@%d: %v\n", prog, r.Topic, r.Partition, r.Offset, err)
		return
	}
	if !c.dedup.first(ev.GetEventId(), ev.GetSequence()) {
		c.duplicates++
		fmt.Fprintf(os.Stderr, "%s: duplicate id=%s (%s/%d@%d) dropped\n", prog, ev.GetEventId(), r.Topic, r.Partition, r.Offset)
		return
	}
	fmt.Fprintf(os.Stdout, "seq=%d id=%s key=%s type=%s topic=%s partition=%d offset=%d\n",
		ev.GetSequence(), ev.GetEventId(), ev.GetKey(), ev.GetType(), r.Topic, r.Partition, r.Offset)
}

// idleTimer tells when nothing new has come for a while (d == 0: never).
type idleTimer struct {
	d    time.Duration
	last time.Time
}

func newIdleTimer(d time.Duration) *idleTimer { return &idleTimer{d: d, last: time.Now()} }
func (t *idleTimer) reset()                   { t.last = time.Now() }
func (t *idleTimer) expired() bool            { return t.d > 0 && time.Since(t.last) >= t.d }

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
