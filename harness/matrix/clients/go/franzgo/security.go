package main

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"groupshift/matrix/clients/vc"
)

// securityOpts turns the properties' TLS and SASL settings into franz-go's dialer and mechanism:
// kgo.DialTLSConfig for SSL and SASL_SSL, kgo.SASL with sasl/plain or sasl/scram for SASL_*.
func securityOpts(props map[string]string) ([]kgo.Opt, error) {
	s, err := vc.SecurityFrom(props)
	if err != nil {
		return nil, err
	}
	var opts []kgo.Opt
	if s.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(s.TLS))
	}
	if s.Mechanism == "" {
		return opts, nil
	}
	var mechanism sasl.Mechanism
	switch s.Mechanism {
	case "PLAIN":
		mechanism = plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()
	case "SCRAM-SHA-256":
		mechanism = scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		mechanism = scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()
	default:
		return nil, fmt.Errorf("sasl.mechanism %q: this client speaks PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512", s.Mechanism)
	}
	return append(opts, kgo.SASL(mechanism)), nil
}
