// A fake Kafka cluster (franz-go's kfake) on 127.0.0.1, for groupshift's upstream-mode e2e
// tests (harness/kfake.py builds and starts it; this directory is its Go module). kfake is an in-memory, Kafka-compatible
// broker written in Go; with -as-version it advertises only what that Kafka release served,
// so "-as-version 2.4" gives a backend with Metadata up to v9 (no topic ids) and no KIP-848.
//
// It prints each broker's host:port on stdout, one a line, once it listens, and runs until
// SIGTERM or SIGINT.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kversion"
)

func main() {
	port := flag.Int("port", 0, "the first broker's port on 127.0.0.1 (0: a free one)")
	brokers := flag.Int("brokers", 1, "how many brokers")
	asVersion := flag.String("as-version", "", "advertise only what this Kafka release served (2.4, 3.9, ...)")
	clusterID := flag.String("cluster-id", "", "the cluster id Metadata answers (empty: kfake's)")
	partitions := flag.Int("partitions", 1, "partitions of a topic created without a count")
	flag.Parse()

	ports := make([]int, *brokers)
	for i := range ports {
		if *port != 0 {
			ports[i] = *port + i
		}
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(*brokers),
		kfake.Ports(ports...),
		kfake.DefaultNumPartitions(*partitions),
	}
	if *clusterID != "" {
		opts = append(opts, kfake.ClusterID(*clusterID))
	}
	if *asVersion != "" {
		v := kversion.FromString(*asVersion)
		if v == nil {
			fmt.Fprintf(os.Stderr, "unknown Kafka version %q (known: %v)\n", *asVersion, kversion.VersionStrings())
			os.Exit(2)
		}
		opts = append(opts, kfake.MaxVersions(v))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kfake: %v\n", err)
		os.Exit(1)
	}
	for _, addr := range c.ListenAddrs() {
		fmt.Println(addr)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	<-sigs
	c.Close()
}
