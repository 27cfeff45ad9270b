package clustertest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/cluster"
)

// LeafTLS generates, in t.TempDir(), a CA and one certificate it signs
// for 127.0.0.1 and localhost, good for servers and clients alike, and
// returns the files as a cluster.LeafTLS (without Verify): give it to
// every server of a test topology to put its leaf links on TLS.
func LeafTLS(t testing.TB) *cluster.LeafTLS {
	t.Helper()
	dir := t.TempDir()
	ca, caKey := newCA(t, "pmixbus test CA")
	certDER := sign(t, ca, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "pmixbus test server"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature,
	}, dir, "server")
	return &cluster.LeafTLS{
		Cert: writePEM(t, dir, "server.pem", "CERTIFICATE", certDER),
		Key:  filepath.Join(dir, "server-key.pem"),
		CA:   writePEM(t, dir, "ca.pem", "CERTIFICATE", ca.Raw),
	}
}

// OtherCA writes, in t.TempDir(), the certificate of a CA that signed
// nothing of LeafTLS's, and returns its file: a leaf that trusts only it
// refuses the hub.
func OtherCA(t testing.TB) string {
	t.Helper()
	ca, _ := newCA(t, "pmixbus other CA")
	return writePEM(t, t.TempDir(), "other-ca.pem", "CERTIFICATE", ca.Raw)
}

func nextSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

func newCA(t testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}

// sign issues tmpl for a fresh key, written to dir/<name>-key.pem, and
// returns the certificate's DER.
func sign(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, tmpl *x509.Certificate, dir, name string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = nextSerial()
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, dir, name+"-key.pem", "PRIVATE KEY", keyDER)
	return der
}

func writePEM(t testing.TB, dir, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
