package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
)

// LeafTLS secures a server's leaf-node links with TLS, on both ends: the
// leaf listener (LeafPort) and the links to hubs (LeafRemotes). Its files
// are PEM, read when the server starts and again at each Restart.
//
// A hub needs Cert and Key; a leaf needs CA unless the hub's certificate
// chains to a root the system trusts. With Verify the hub also checks the
// leaves' certificates (mutual TLS), and each leaf then needs Cert and Key
// too. The servers of a MultiCluster share one LeafTLS, so there every
// server presents the same certificate.
type LeafTLS struct {
	// Cert and Key are this server's certificate and private key: shown by
	// the listener to the leaf nodes that connect, and by the links to
	// their hub, as a client certificate. Both or neither.
	Cert, Key string

	// CA holds the certificates that sign the other ends': the links
	// check the hub's certificate against them (empty: the system's
	// roots), and with Verify the listener checks the leaves'. The hub's
	// certificate must name the host of the leaf remote URL.
	CA string

	// Verify makes the listener require a certificate, signed by CA, from
	// every leaf node that connects.
	Verify bool
}

// validate reports the problems of t into p; hub tells whether the
// server has a leaf listener.
func (t *LeafTLS) validate(p *problems, hub bool) {
	if (t.Cert == "") != (t.Key == "") {
		p.addf("LeafTLS: Cert and Key go together; one is empty")
	}
	if hub && t.Cert == "" {
		p.addf("LeafTLS: a leaf listener (LeafPort) needs Cert and Key")
	}
	if t.Verify && t.CA == "" {
		p.addf("LeafTLS: Verify needs the CA that signs the leaves' certificates")
	}
	for _, f := range []struct{ name, path string }{{"Cert", t.Cert}, {"Key", t.Key}, {"CA", t.CA}} {
		if f.path != "" && strings.TrimSpace(f.path) == "" {
			p.addf("LeafTLS.%s: blank file name", f.name)
		}
	}
}

// listenerConfig is the TLS configuration of the leaf listener.
func (t *LeafTLS) listenerConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
	if err != nil {
		return nil, fmt.Errorf("leaf TLS certificate %s, key %s: %w", t.Cert, t.Key, err)
	}
	cfg.Certificates = []tls.Certificate{cert}
	if t.CA != "" {
		if cfg.ClientCAs, err = loadCA(t.CA); err != nil {
			return nil, err
		}
	}
	if t.Verify {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// remoteConfig is the TLS configuration of one leaf link. Each link gets
// its own: nats-server writes the hub's host name into it.
func (t *LeafTLS) remoteConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.Cert != "" {
		cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, fmt.Errorf("leaf TLS certificate %s, key %s: %w", t.Cert, t.Key, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if t.CA != "" {
		pool, err := loadCA(t.CA)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

func loadCA(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("leaf TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("leaf TLS CA %s: %w", path, errNoCertificate)
	}
	return pool, nil
}

var errNoCertificate = errors.New("no PEM certificate in the file")
