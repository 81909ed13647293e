package vc

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Security is what a client's properties file says about TLS and SASL, in the words of Kafka's
// client configuration (security.protocol, ssl.truststore.*, ssl.keystore.*, sasl.mechanism,
// sasl.jaas.config) or librdkafka's (ssl.ca.location, ssl.certificate.location, ssl.key.location,
// sasl.username, sasl.password), so one file drives the Java, librdkafka and Go verifiable
// consumers alike. Stores must be PEM: Go reads neither JKS nor PKCS12 without a third-party module.
type Security struct {
	Protocol  string // PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
	TLS       *tls.Config
	Mechanism string // PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (SASL_* only)
	Username  string
	Password  string
}

var jaasOption = regexp.MustCompile(`(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"`)

// SecurityFrom reads the security properties; an unsupported store type or mechanism is an error
// naming the property, never a silent plaintext connection.
func SecurityFrom(props map[string]string) (Security, error) {
	s := Security{Protocol: strings.ToUpper(props["security.protocol"])}
	if s.Protocol == "" {
		s.Protocol = "PLAINTEXT"
	}
	switch s.Protocol {
	case "PLAINTEXT":
		return s, nil
	case "SSL", "SASL_SSL":
		cfg, err := tlsConfig(props)
		if err != nil {
			return s, err
		}
		s.TLS = cfg
	case "SASL_PLAINTEXT":
	default:
		return s, fmt.Errorf("security.protocol %q is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", s.Protocol)
	}
	if !strings.HasPrefix(s.Protocol, "SASL_") {
		return s, nil
	}
	s.Mechanism = strings.ToUpper(props["sasl.mechanism"])
	if s.Mechanism == "" {
		s.Mechanism = "GSSAPI" // Kafka's default, which no Go client here speaks
	}
	s.Username, s.Password = props["sasl.username"], props["sasl.password"]
	for _, m := range jaasOption.FindAllStringSubmatch(props["sasl.jaas.config"], -1) {
		value := strings.ReplaceAll(strings.ReplaceAll(m[2], `\"`, `"`), `\\`, `\`)
		if m[1] == "username" {
			s.Username = value
		} else {
			s.Password = value
		}
	}
	return s, nil
}

func first(props map[string]string, keys ...string) string {
	for _, k := range keys {
		if v := props[k]; v != "" {
			return v
		}
	}
	return ""
}

func tlsConfig(props map[string]string) (*tls.Config, error) {
	for _, key := range []string{"ssl.truststore.type", "ssl.keystore.type"} {
		if t := props[key]; t != "" && !strings.EqualFold(t, "PEM") {
			return nil, fmt.Errorf("%s=%s: this client reads PEM stores only", key, t)
		}
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca := first(props, "ssl.truststore.location", "ssl.ca.location"); ca != "" {
		data, err := os.ReadFile(ca)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("no PEM certificate in %s", ca)
		}
		cfg.RootCAs = pool
	}
	// A PEM keystore holds the key and the chain in one file; librdkafka names them apart.
	certFile := first(props, "ssl.keystore.location", "ssl.certificate.location")
	keyFile := first(props, "ssl.key.location", "ssl.keystore.location")
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate %s / key %s: %w", certFile, keyFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	// ssl.endpoint.identification.algorithm= (empty) turns host name checks off, as in Kafka.
	if v, ok := props["ssl.endpoint.identification.algorithm"]; ok && v == "" {
		cfg.InsecureSkipVerify = true
	}
	return cfg, nil
}
