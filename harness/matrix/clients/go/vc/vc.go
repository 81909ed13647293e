// Package vc holds what the Go verifiable consumers share: Kafka VerifiableConsumer's command
// line (and that of harness/matrix/clients/verifiable_consumer.py) and its JSON-lines events.
package vc

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// NewOut writes events to stdout.
func NewOut() *Out { return &Out{w: bufio.NewWriter(os.Stdout)} }

// Out serialises event lines: the clients' callbacks run on their own goroutines.
type Out struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (o *Out) Emit(name string, fields map[string]any) {
	// The timestamp is read under the lock, so lines from different goroutines are in time order.
	o.mu.Lock()
	defer o.mu.Unlock()
	event := map[string]any{"timestamp": time.Now().UnixMilli(), "name": name}
	for k, v := range fields {
		event[k] = v
	}
	line, err := json.Marshal(event)
	if err != nil {
		line = []byte(fmt.Sprintf("Bad data can't be written as json: %v", err))
	}
	o.w.Write(line)
	o.w.WriteByte('\n')
	o.w.Flush()
}

type TopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

func PartitionList(m map[string][]int32) []TopicPartition {
	list := []TopicPartition{}
	for topic, partitions := range m {
		for _, p := range partitions {
			list = append(list, TopicPartition{topic, p})
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

type Options struct {
	Bootstrap      string
	Topic          string
	GroupProtocol  string
	RemoteAssignor string
	GroupID        string
	InstanceID     string
	MaxMessages    int
	SessionTimeout int
	Verbose        bool
	AutoCommit     bool
	ResetPolicy    string
	Assignment     string
	ConsumerConfig string
	CommandConfig  string
	ClientID       string
	HeartbeatMs    int
	MaxPollMs      int
}

func ParseOptions(name string) Options {
	var o Options
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	fs.StringVar(&o.Bootstrap, "bootstrap-server", "", "host:port list of the cluster")
	fs.StringVar(&o.Bootstrap, "broker-list", "", "deprecated alias of --bootstrap-server")
	fs.StringVar(&o.Topic, "topic", "", "topic to consume")
	fs.StringVar(&o.GroupProtocol, "group-protocol", "classic", "classic or consumer (KIP-848)")
	fs.StringVar(&o.RemoteAssignor, "group-remote-assignor", "", "uniform or range (consumer protocol)")
	fs.StringVar(&o.GroupID, "group-id", "", "consumer group id")
	fs.StringVar(&o.InstanceID, "group-instance-id", "", "static member id")
	fs.IntVar(&o.MaxMessages, "max-messages", -1, "stop after this many records (-1: never)")
	fs.IntVar(&o.SessionTimeout, "session-timeout", 30000, "session timeout in ms (classic)")
	fs.BoolVar(&o.Verbose, "verbose", false, "print a record_data event per record")
	fs.BoolVar(&o.AutoCommit, "enable-autocommit", false, "let the client commit on its own")
	fs.StringVar(&o.ResetPolicy, "reset-policy", "earliest", "earliest, latest or none")
	fs.StringVar(&o.Assignment, "assignment-strategy", "", "classic assignor (Java class or short name)")
	fs.StringVar(&o.ConsumerConfig, "consumer.config", "", "properties file (client.id, heartbeat.interval.ms, max.poll.interval.ms)")
	fs.StringVar(&o.CommandConfig, "command-config", "", "same as --consumer.config")
	// The flags of harness/matrix/clients/verifiable_consumer.py, so the runner can hand every
	// non-Java client the same command line.
	fs.StringVar(&o.Assignment, "assignor", "", "short assignor name: range, roundrobin, sticky, cooperative-sticky (classic); uniform or range (consumer)")
	fs.StringVar(&o.ClientID, "client-id", "", "client.id")
	fs.IntVar(&o.HeartbeatMs, "heartbeat-interval", 0, "heartbeat.interval.ms (classic)")
	fs.IntVar(&o.MaxPollMs, "max-poll-interval", 0, "max.poll.interval.ms, franz-go's rebalance timeout")
	fs.String("library", "franz-go", "ignored: names the client family for the runner")
	_ = fs.Parse(os.Args[1:])
	if o.Bootstrap == "" || o.Topic == "" || o.GroupID == "" {
		fmt.Fprintln(os.Stderr, "--bootstrap-server, --topic and --group-id are required")
		os.Exit(2)
	}
	return o
}

func LoadProperties(path string) (map[string]string, error) {
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

func Nullable(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// Properties merges --consumer.config and --command-config files with the flags that name the
// same settings (client.id, heartbeat.interval.ms, max.poll.interval.ms); it exits on a bad file.
func (o *Options) Properties() map[string]string {
	props := map[string]string{}
	for _, path := range []string{o.ConsumerConfig, o.CommandConfig} {
		p, err := LoadProperties(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for k, v := range p {
			props[k] = v
		}
	}
	if o.ClientID != "" {
		props["client.id"] = o.ClientID
	}
	if o.HeartbeatMs > 0 {
		props["heartbeat.interval.ms"] = strconv.Itoa(o.HeartbeatMs)
	}
	if o.MaxPollMs > 0 {
		props["max.poll.interval.ms"] = strconv.Itoa(o.MaxPollMs)
	}
	return props
}

// Millis reads a property in milliseconds; ok is false when it is absent or not a number.
func Millis(props map[string]string, key string) (time.Duration, bool) {
	ms, err := strconv.Atoi(props[key])
	return time.Duration(ms) * time.Millisecond, err == nil
}

// Committed is one entry of offsets_committed.
type Committed struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// Summary is one partition of records_consumed.
type Summary struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Count     int    `json:"count"`
	MinOffset int64  `json:"minOffset"`
	MaxOffset int64  `json:"maxOffset"`
}

// StringShort is the last dotted part of a Java class name, lower-cased ("RangeAssignor" -> "rangeassignor").
func StringShort(name string) string {
	return strings.ToLower(name[strings.LastIndex(name, ".")+1:])
}

// Sorted orders partitions by topic then number.
func Sorted[T any](list []T, key func(T) (string, int32)) {
	sort.Slice(list, func(i, j int) bool {
		ti, pi := key(list[i])
		tj, pj := key(list[j])
		if ti != tj {
			return ti < tj
		}
		return pi < pj
	})
}
