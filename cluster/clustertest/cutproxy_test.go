package clustertest

import (
	"testing"
	"time"
)

// A client through a CutProxy: its messages pass, are held while the link
// is cut (nothing closed: the connection stays up), and pass once it is
// restored, none lost.
func TestCutProxy(t *testing.T) {
	srv := StartServer(t, "A")
	p, err := NewCutProxy()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	url, err := p.Via(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	direct := Connect(t, srv.ClientURL())
	sub, err := direct.SubscribeSync("cut.test")
	if err != nil {
		t.Fatal(err)
	}
	if err := direct.Flush(); err != nil {
		t.Fatal(err)
	}
	through := Connect(t, url)
	if err := through.Publish("cut.test", []byte("before")); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsg(10 * time.Second); err != nil || string(m.Data) != "before" {
		t.Fatalf("through the proxy: %v, %v", m, err)
	}
	p.Cut()
	if err := through.Publish("cut.test", []byte("during")); err != nil {
		t.Fatal(err)
	}
	_ = through.FlushTimeout(50 * time.Millisecond) // the PONG cannot come
	if m, err := sub.NextMsg(200 * time.Millisecond); err == nil {
		t.Fatalf("%q passed a cut link", m.Data)
	}
	if !through.IsConnected() {
		t.Fatal("the cut closed the connection")
	}
	p.Restore()
	if m, err := sub.NextMsg(10 * time.Second); err != nil || string(m.Data) != "during" {
		t.Fatalf("after the restore: %v, %v", m, err)
	}
}

func TestCutProxyBadURL(t *testing.T) {
	p, err := NewCutProxy()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Via("no-host"); err == nil {
		t.Fatal("a URL without host:port: no error")
	}
}
