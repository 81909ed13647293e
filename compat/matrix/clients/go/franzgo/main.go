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
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// out serialises event lines: callbacks run on franz-go's goroutines.
type out struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (o *out) emit(name string, fields map[string]any) {
	event := map[string]any{"timestamp": time.Now().UnixMilli(), "name": name}
	for k, v := range fields {
		event[k] = v
	}
	line, err := json.Marshal(event)
	if err != nil {
		line = []byte(fmt.Sprintf("Bad data can't be written as json: %v", err))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.w.Write(line)
	o.w.WriteByte('\n')
	o.w.Flush()
}

type topicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

func partitionList(m map[string][]int32) []topicPartition {
	list := []topicPartition{}
	for topic, partitions := range m {
		for _, p := range partitions {
			list = append(list, topicPartition{topic, p})
		}
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].Topic != list[j].Topic {
			return list[i].Topic < list[j].Topic
		}
		return list[i].Partition < list[j].Partition
	})
	return list
}

type options struct {
	bootstrap      string
	topic          string
	groupProtocol  string
	remoteAssignor string
	groupID        string
	instanceID     string
	maxMessages    int
	sessionTimeout int
	verbose        bool
	autoCommit     bool
	resetPolicy    string
	assignment     string
	consumerConfig string
	commandConfig  string
	clientID       string
	heartbeatMs    int
	maxPollMs      int
}

func parseOptions() options {
	var o options
	fs := flag.NewFlagSet("franzgo", flag.ExitOnError)
	fs.StringVar(&o.bootstrap, "bootstrap-server", "", "host:port list of the cluster")
	fs.StringVar(&o.bootstrap, "broker-list", "", "deprecated alias of --bootstrap-server")
	fs.StringVar(&o.topic, "topic", "", "topic to consume")
	fs.StringVar(&o.groupProtocol, "group-protocol", "classic", "classic or consumer (KIP-848)")
	fs.StringVar(&o.remoteAssignor, "group-remote-assignor", "", "uniform or range (consumer protocol)")
	fs.StringVar(&o.groupID, "group-id", "", "consumer group id")
	fs.StringVar(&o.instanceID, "group-instance-id", "", "static member id")
	fs.IntVar(&o.maxMessages, "max-messages", -1, "stop after this many records (-1: never)")
	fs.IntVar(&o.sessionTimeout, "session-timeout", 30000, "session timeout in ms (classic)")
	fs.BoolVar(&o.verbose, "verbose", false, "print a record_data event per record")
	fs.BoolVar(&o.autoCommit, "enable-autocommit", false, "let the client commit on its own")
	fs.StringVar(&o.resetPolicy, "reset-policy", "earliest", "earliest, latest or none")
	fs.StringVar(&o.assignment, "assignment-strategy", "", "classic assignor (Java class or short name)")
	fs.StringVar(&o.consumerConfig, "consumer.config", "", "properties file (client.id, heartbeat.interval.ms, max.poll.interval.ms)")
	fs.StringVar(&o.commandConfig, "command-config", "", "same as --consumer.config")
	// The flags of compat/matrix/clients/verifiable_consumer.py, so the runner can hand every
	// non-Java client the same command line.
	fs.StringVar(&o.assignment, "assignor", "", "short assignor name: range, roundrobin, sticky, cooperative-sticky (classic); uniform or range (consumer)")
	fs.StringVar(&o.clientID, "client-id", "", "client.id")
	fs.IntVar(&o.heartbeatMs, "heartbeat-interval", 0, "heartbeat.interval.ms (classic)")
	fs.IntVar(&o.maxPollMs, "max-poll-interval", 0, "max.poll.interval.ms, franz-go's rebalance timeout")
	fs.String("library", "franz-go", "ignored: names the client family for the runner")
	_ = fs.Parse(os.Args[1:])
	if o.bootstrap == "" || o.topic == "" || o.groupID == "" {
		fmt.Fprintln(os.Stderr, "--bootstrap-server, --topic and --group-id are required")
		os.Exit(2)
	}
	return o
}

func loadProperties(path string) (map[string]string, error) {
	props := map[string]string{}
	if path == "" {
		return props, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "!") {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			props[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return props, nil
}

// balancer maps VerifiableConsumer's --assignment-strategy (a Java class name) or a short name to
// franz-go's balancer of the same algorithm.
func balancer(name string) (kgo.GroupBalancer, error) {
	short := strings.ToLower(name[strings.LastIndex(name, ".")+1:])
	switch short {
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
	o := parseOptions()
	emitter := &out{w: bufio.NewWriter(os.Stdout)}
	props := map[string]string{}
	for _, path := range []string{o.consumerConfig, o.commandConfig} {
		p, err := loadProperties(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for k, v := range p {
			props[k] = v
		}
	}

	reset := kgo.NewOffset().AtStart()
	switch o.resetPolicy {
	case "latest":
		reset = kgo.NewOffset().AtEnd()
	case "none":
		reset = kgo.NoResetOffset()
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(o.bootstrap, ",")...),
		kgo.ConsumerGroup(o.groupID),
		kgo.ConsumeTopics(o.topic),
		kgo.ConsumeResetOffset(reset),
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(time.Duration(o.sessionTimeout) * time.Millisecond),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelWarn, nil)),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			emitter.emit("partitions_assigned", map[string]any{"partitions": partitionList(m)})
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			emitter.emit("partitions_revoked", map[string]any{"partitions": partitionList(m)})
		}),
		// Kafka 4.3's VerifiableConsumer has no onPartitionsLost: the Java default reports a loss
		// through onPartitionsRevoked, and so does this client.
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			emitter.emit("partitions_revoked", map[string]any{"partitions": partitionList(m)})
		}),
	}
	if o.clientID != "" {
		props["client.id"] = o.clientID
	}
	if o.heartbeatMs > 0 {
		props["heartbeat.interval.ms"] = strconv.Itoa(o.heartbeatMs)
	}
	if o.maxPollMs > 0 {
		props["max.poll.interval.ms"] = strconv.Itoa(o.maxPollMs)
	}
	if id, ok := props["client.id"]; ok {
		opts = append(opts, kgo.ClientID(id))
	}
	if ms, err := strconv.Atoi(props["heartbeat.interval.ms"]); err == nil {
		opts = append(opts, kgo.HeartbeatInterval(time.Duration(ms)*time.Millisecond))
	}
	if ms, err := strconv.Atoi(props["max.poll.interval.ms"]); err == nil {
		opts = append(opts, kgo.RebalanceTimeout(time.Duration(ms)*time.Millisecond))
	}
	if o.instanceID != "" {
		opts = append(opts, kgo.InstanceID(o.instanceID))
	}
	if !o.autoCommit {
		opts = append(opts, kgo.DisableAutoCommit())
	}
	switch o.groupProtocol {
	case "classic":
		b, err := balancer(o.assignment)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		opts = append(opts, kgo.Balancers(b))
	case "consumer":
		remote := o.remoteAssignor
		if remote == "" && (o.assignment == "uniform" || o.assignment == "range") {
			remote = o.assignment
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
		fmt.Fprintf(os.Stderr, "unknown group protocol %q\n", o.groupProtocol)
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
		emitter.emit("shutdown_requested", nil)
		cancel()
	}()

	emitter.emit("startup_complete", nil)
	consumed := 0
	for ctx.Err() == nil && (o.maxMessages < 0 || consumed < o.maxMessages) {
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
	emitter.emit("shutdown_complete", nil)
}

// onRecords reports a poll's records like VerifiableConsumer.onRecordsReceived (capped at
// --max-messages) and commits the next offset of each partition synchronously.
func onRecords(client *kgo.Client, emitter *out, fetches kgo.Fetches, o *options, consumed int) int {
	type summary struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Count     int    `json:"count"`
		MinOffset int64  `json:"minOffset"`
		MaxOffset int64  `json:"maxOffset"`
	}
	summaries := []summary{}
	offsets := map[string]map[int32]kgo.EpochOffset{}
	count := 0
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		records := p.Records
		if o.maxMessages >= 0 && consumed+count+len(records) > o.maxMessages {
			records = records[:o.maxMessages-consumed-count]
		}
		if len(records) == 0 {
			return
		}
		first, last := records[0], records[len(records)-1]
		summaries = append(summaries, summary{p.Topic, p.Partition, len(records), first.Offset, last.Offset})
		if offsets[p.Topic] == nil {
			offsets[p.Topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[p.Topic][p.Partition] = kgo.EpochOffset{Epoch: last.LeaderEpoch, Offset: last.Offset + 1}
		if o.verbose {
			for _, r := range records {
				emitter.emit("record_data", map[string]any{
					"topic": r.Topic, "partition": r.Partition, "key": nullable(r.Key),
					"value": nullable(r.Value), "offset": r.Offset,
				})
			}
		}
		count += len(records)
	})
	if count == 0 {
		return 0
	}
	emitter.emit("records_consumed", map[string]any{"count": count, "partitions": summaries})
	if o.autoCommit {
		return count
	}
	client.CommitOffsetsSync(context.Background(), offsets,
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			emitter.emit("offsets_committed", commitEvent(offsets, resp, err))
		})
	return count
}

// commitEvent builds offsets_committed: every offset asked for, and the first error (a request
// error, or a partition's error code) as VerifiableConsumer reports the commit's exception.
func commitEvent(offsets map[string]map[int32]kgo.EpochOffset, resp *kmsg.OffsetCommitResponse, err error) map[string]any {
	type committed struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Offset    int64  `json:"offset"`
	}
	list := []committed{}
	for topic, partitions := range offsets {
		for p, eo := range partitions {
			list = append(list, committed{topic, p, eo.Offset})
		}
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].Topic != list[j].Topic {
			return list[i].Topic < list[j].Topic
		}
		return list[i].Partition < list[j].Partition
	})
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

func nullable(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}
