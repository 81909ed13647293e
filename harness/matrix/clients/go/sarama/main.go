// Command sarama is a verifiable consumer built on Sarama (github.com/IBM/sarama), the other Go
// client family fleets run. Same command line and JSON-lines events as Kafka's VerifiableConsumer
// (see package vc); classic protocol only: Sarama has no KIP-848 consumer, so
// --group-protocol consumer is refused with a message.
//
// Sarama hands each assigned partition to its own ConsumeClaim goroutine: partitions_assigned is
// printed when a claim starts and partitions_revoked when it ends (its channel closed by an eager
// rebalance, a cooperative revocation, or the leave), after its last commit, so the revocation is
// printed before the partition can go to another member, as the Java listener's would be. Each
// batch of records read from a claim is marked and committed synchronously (session.Commit())
// before more are read. Sarama's Commit returns no error: a failed commit reaches the consumer
// group's Errors channel, which is printed on stderr, and offsets_committed reports success.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/IBM/sarama"

	"groupshift/matrix/clients/vc"
)

// batchLimit caps how many already-buffered records one records_consumed event covers.
const batchLimit = 500

type handler struct {
	out      *vc.Out
	opts     *vc.Options
	mu       sync.Mutex
	consumed int
	done     context.CancelFunc
}

func (h *handler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *handler) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	tp := []vc.TopicPartition{{Topic: claim.Topic(), Partition: claim.Partition()}}
	h.out.Emit("partitions_assigned", map[string]any{"partitions": tp})
	defer h.out.Emit("partitions_revoked", map[string]any{"partitions": tp})
	messages := claim.Messages()
	for {
		var batch []*sarama.ConsumerMessage
		select {
		case m, ok := <-messages:
			if !ok {
				return nil
			}
			batch = append(batch, m)
		case <-session.Context().Done():
			return nil
		}
	drain:
		for len(batch) < batchLimit {
			select {
			case m, ok := <-messages:
				if !ok {
					break drain
				}
				batch = append(batch, m)
			default:
				break drain
			}
		}
		if !h.take(&batch) {
			return nil
		}
		h.report(session, batch)
	}
}

// take trims the batch to --max-messages; false when nothing is left to take.
func (h *handler) take(batch *[]*sarama.ConsumerMessage) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.opts.MaxMessages >= 0 {
		left := h.opts.MaxMessages - h.consumed
		if left <= 0 {
			h.done()
			return false
		}
		if len(*batch) > left {
			*batch = (*batch)[:left]
		}
	}
	h.consumed += len(*batch)
	if h.opts.MaxMessages >= 0 && h.consumed >= h.opts.MaxMessages {
		defer h.done()
	}
	return len(*batch) > 0
}

func (h *handler) report(session sarama.ConsumerGroupSession, batch []*sarama.ConsumerMessage) {
	first, last := batch[0], batch[len(batch)-1]
	if h.opts.Verbose {
		for _, m := range batch {
			h.out.Emit("record_data", map[string]any{
				"topic": m.Topic, "partition": m.Partition, "key": vc.Nullable(m.Key),
				"value": vc.Nullable(m.Value), "offset": m.Offset,
			})
		}
	}
	h.out.Emit("records_consumed", map[string]any{"count": len(batch), "partitions": []vc.Summary{{
		Topic: last.Topic, Partition: last.Partition, Count: len(batch),
		MinOffset: first.Offset, MaxOffset: last.Offset,
	}}})
	session.MarkMessage(last, "")
	if h.opts.AutoCommit {
		return
	}
	session.Commit()
	h.out.Emit("offsets_committed", map[string]any{
		"offsets": []vc.Committed{{Topic: last.Topic, Partition: last.Partition, Offset: last.Offset + 1}},
		"success": true,
	})
}

func strategy(name string) (sarama.BalanceStrategy, error) {
	switch vc.StringShort(name) {
	case "", "rangeassignor", "range":
		return sarama.NewBalanceStrategyRange(), nil
	case "roundrobinassignor", "roundrobin":
		return sarama.NewBalanceStrategyRoundRobin(), nil
	case "stickyassignor", "sticky":
		return sarama.NewBalanceStrategySticky(), nil
	case "cooperativestickyassignor", "cooperative-sticky":
		return sarama.NewBalanceStrategyCooperativeSticky(), nil
	}
	return nil, fmt.Errorf("unknown assignment strategy %q", name)
}

func main() {
	o := vc.ParseOptions("sarama")
	out := vc.NewOut()
	props := o.Properties()
	if o.GroupProtocol != "classic" {
		fmt.Fprintf(os.Stderr, "Sarama has no KIP-848 consumer: group protocol %q is not available\n", o.GroupProtocol)
		os.Exit(2)
	}
	s, err := strategy(o.Assignment)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_0_0_0
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{s}
	cfg.Consumer.Group.Session.Timeout = time.Duration(o.SessionTimeout) * time.Millisecond
	cfg.Consumer.Offsets.AutoCommit.Enable = o.AutoCommit
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	if o.ResetPolicy == "latest" {
		cfg.Consumer.Offsets.Initial = sarama.OffsetNewest
	}
	if id, ok := props["client.id"]; ok {
		cfg.ClientID = id
	}
	if d, ok := vc.Millis(props, "heartbeat.interval.ms"); ok {
		cfg.Consumer.Group.Heartbeat.Interval = d
	}
	if d, ok := vc.Millis(props, "max.poll.interval.ms"); ok {
		cfg.Consumer.Group.Rebalance.Timeout = d
	}
	if o.InstanceID != "" {
		cfg.Consumer.Group.InstanceId = o.InstanceID
	}
	group, err := sarama.NewConsumerGroup(strings.Split(o.Bootstrap, ","), o.GroupID, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		out.Emit("shutdown_requested", nil)
		cancel()
	}()
	go func() {
		for err := range group.Errors() {
			fmt.Fprintf(os.Stderr, "consumer group error: %v\n", err)
		}
	}()
	h := &handler{out: out, opts: &o, done: cancel}
	out.Emit("startup_complete", nil)
	for ctx.Err() == nil {
		// an eager rebalance ends Consume; a cooperative one does not (see sarama.ConsumerGroup)
		if err := group.Consume(ctx, []string{o.Topic}, h); err != nil {
			if errors.Is(err, sarama.ErrClosedConsumerGroup) {
				break
			}
			fmt.Fprintf(os.Stderr, "consume: %v\n", err)
			time.Sleep(200 * time.Millisecond)
		}
	}
	if err := group.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "close: %v\n", err)
	}
	out.Emit("shutdown_complete", nil)
}
