// Command franzgo is a verifiable consumer built on franz-go (github.com/twmb/franz-go).
//
// It takes the command line of Kafka's VerifiableConsumer (org.apache.kafka.tools) and prints the
// same JSON-lines events on stdout (startup_complete, partitions_assigned, partitions_revoked,
// records_consumed, record_data with --verbose, offsets_committed, shutdown_requested,
// shutdown_complete; each with "timestamp" in ms and "name"), so the matrix runner checks a Go
// fleet with the same invariant checkers as the Java one.
//
// Like VerifiableConsumer it commits synchronously after every poll (unless --enable-autocommit)
// and a rebalance cannot land between a poll and its commit: BlockRebalanceOnPoll makes franz-go's
// revocations wait for AllowRebalance, as the Java consumer runs its listener inside poll().
// --group-protocol consumer opts into KIP-848 with franz-go's ServerSideBalancer: the server
// assignor is "uniform" for the sticky balancer and "range" for the range balancer, which is how
// --group-remote-assignor is mapped. franz-go joins classic when the broker does not serve
// ConsumerGroupHeartbeat v1.
// TLS and SASL (PLAIN, SCRAM-SHA-256/512) come from the properties file's Kafka client settings
// (security.protocol, PEM ssl.truststore/keystore, sasl.mechanism, sasl.jaas.config): see
// vc.SecurityFrom.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"groupshift/matrix/clients/vc"
)

// balancer maps VerifiableConsumer's --assignment-strategy (a Java class name) or a short name to
// franz-go's balancer of the same algorithm.
func balancer(name string) (kgo.GroupBalancer, error) {
	switch vc.StringShort(name) {
	case "", "rangeassignor", "range":
		return kgo.RangeBalancer(), nil
	case "roundrobinassignor", "roundrobin":
		return kgo.RoundRobinBalancer(), nil
	case "stickyassignor", "sticky":
		return kgo.StickyBalancer(), nil
	case "cooperativestickyassignor", "cooperative-sticky":
		return kgo.CooperativeStickyBalancer(), nil
	}
	return nil, fmt.Errorf("unknown assignment strategy %q", name)
}

func main() {
	o := vc.ParseOptions("franzgo")
	emitter := vc.NewOut()
	props := o.Properties()

	reset := kgo.NewOffset().AtStart()
	switch o.ResetPolicy {
	case "latest":
		reset = kgo.NewOffset().AtEnd()
	case "none":
		reset = kgo.NoResetOffset()
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(o.Bootstrap, ",")...),
		kgo.ConsumerGroup(o.GroupID),
		kgo.ConsumeTopics(o.Topic),
		kgo.ConsumeResetOffset(reset),
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(time.Duration(o.SessionTimeout) * time.Millisecond),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelWarn, nil)),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			emitter.Emit("partitions_assigned", map[string]any{"partitions": vc.PartitionList(m)})
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			emitter.Emit("partitions_revoked", map[string]any{"partitions": vc.PartitionList(m)})
		}),
		// Kafka 4.3's VerifiableConsumer has no onPartitionsLost: the Java default reports a loss
		// through onPartitionsRevoked, and so does this client.
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			emitter.Emit("partitions_revoked", map[string]any{"partitions": vc.PartitionList(m)})
		}),
	}
	security, err := securityOpts(props)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	opts = append(opts, security...)
	if id, ok := props["client.id"]; ok {
		opts = append(opts, kgo.ClientID(id))
	}
	if d, ok := vc.Millis(props, "heartbeat.interval.ms"); ok {
		opts = append(opts, kgo.HeartbeatInterval(d))
	}
	if d, ok := vc.Millis(props, "max.poll.interval.ms"); ok {
		opts = append(opts, kgo.RebalanceTimeout(d))
	}
	if o.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(o.InstanceID))
	}
	if !o.AutoCommit {
		opts = append(opts, kgo.DisableAutoCommit())
	}
	switch o.GroupProtocol {
	case "classic":
		b, err := balancer(o.Assignment)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		opts = append(opts, kgo.Balancers(b))
	case "consumer":
		remote := o.RemoteAssignor
		if remote == "" && (o.Assignment == "uniform" || o.Assignment == "range") {
			remote = o.Assignment
		}
		b := kgo.StickyBalancer() // server assignor "uniform", Kafka's default
		if remote == "range" {
			b = kgo.RangeBalancer()
		} else if remote != "" && remote != "uniform" {
			fmt.Fprintf(os.Stderr, "franz-go names only the uniform and range server assignors, not %q\n", remote)
			os.Exit(2)
		}
		opts = append(opts, kgo.Balancers(b), kgo.ServerSideBalancer())
	default:
		fmt.Fprintf(os.Stderr, "unknown group protocol %q\n", o.GroupProtocol)
		os.Exit(2)
	}

	client, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		emitter.Emit("shutdown_requested", nil)
		cancel()
	}()

	emitter.Emit("startup_complete", nil)
	consumed := 0
	for ctx.Err() == nil && (o.MaxMessages < 0 || consumed < o.MaxMessages) {
		fetches := client.PollFetches(ctx)
		fetches.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.Canceled) {
				fmt.Fprintf(os.Stderr, "fetch %s-%d: %v\n", topic, partition, err)
			}
		})
		consumed += onRecords(client, emitter, fetches, &o, consumed)
		client.AllowRebalance()
	}
	client.CloseAllowingRebalance()
	emitter.Emit("shutdown_complete", nil)
}

// onRecords reports a poll's records like VerifiableConsumer.onRecordsReceived (capped at
// --max-messages) and commits the next offset of each partition synchronously.
func onRecords(client *kgo.Client, emitter *vc.Out, fetches kgo.Fetches, o *vc.Options, consumed int) int {
	summaries := []vc.Summary{}
	offsets := map[string]map[int32]kgo.EpochOffset{}
	count := 0
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		records := p.Records
		if o.MaxMessages >= 0 && consumed+count+len(records) > o.MaxMessages {
			records = records[:o.MaxMessages-consumed-count]
		}
		if len(records) == 0 {
			return
		}
		first, last := records[0], records[len(records)-1]
		summaries = append(summaries, vc.Summary{
			Topic: p.Topic, Partition: p.Partition, Count: len(records), MinOffset: first.Offset, MaxOffset: last.Offset,
		})
		if offsets[p.Topic] == nil {
			offsets[p.Topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[p.Topic][p.Partition] = kgo.EpochOffset{Epoch: last.LeaderEpoch, Offset: last.Offset + 1}
		if o.Verbose {
			for _, r := range records {
				emitter.Emit("record_data", map[string]any{
					"topic": r.Topic, "partition": r.Partition, "key": vc.Nullable(r.Key),
					"value": vc.Nullable(r.Value), "offset": r.Offset,
				})
			}
		}
		count += len(records)
	})
	if count == 0 {
		return 0
	}
	emitter.Emit("records_consumed", map[string]any{"count": count, "partitions": summaries})
	if o.AutoCommit {
		return count
	}
	client.CommitOffsetsSync(context.Background(), offsets,
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			emitter.Emit("offsets_committed", commitEvent(offsets, resp, err))
		})
	return count
}

// commitEvent builds offsets_committed: every offset asked for, and the first error (a request
// error, or a partition's error code) as VerifiableConsumer reports the commit's exception.
func commitEvent(offsets map[string]map[int32]kgo.EpochOffset, resp *kmsg.OffsetCommitResponse, err error) map[string]any {
	list := []vc.Committed{}
	for topic, partitions := range offsets {
		for p, eo := range partitions {
			list = append(list, vc.Committed{Topic: topic, Partition: p, Offset: eo.Offset})
		}
	}
	vc.Sorted(list, func(c vc.Committed) (string, int32) { return c.Topic, c.Partition })
	if err == nil && resp != nil {
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if perr := kerr.ErrorForCode(p.ErrorCode); perr != nil {
					err = perr
					break
				}
			}
			if err != nil {
				break
			}
		}
	}
	event := map[string]any{"offsets": list, "success": err == nil}
	if err != nil {
		event["error"] = err.Error()
	}
	return event
}
