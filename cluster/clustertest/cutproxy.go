package clustertest

import (
	"errors"
	"net"
	"net/url"
	"sync"
)

// CutProxy stands between a NATS client (an agent) and its server, as
// the client's network link: Cut makes it stop passing bytes either way
// without closing anything, as a switch port that goes down does (no
// FIN, no RST: each side learns of it only by what stops arriving);
// Restore passes them again, what was held first. Connections made
// while it is cut are accepted and held likewise. For tests and
// benchmarks of partitions on one machine, where network namespaces
// are not permitted or not wanted:
//
//	p, _ := clustertest.NewCutProxy()
//	defer p.Close()
//	url, _ := p.Via(serverURL) // give the client url
//	p.Cut()                    // ... the client is cut off
//	p.Restore()
type CutProxy struct {
	ln net.Listener

	mu     sync.Mutex
	cond   *sync.Cond
	target string // host:port of the server, set before the agent dials
	isCut  bool
	closed bool
	conns  []net.Conn
}

func NewCutProxy() (*CutProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &CutProxy{ln: ln}
	p.cond = sync.NewCond(&p.mu)
	go p.serve()
	return p, nil
}

// Via returns the URL to give the agent instead of serverURL, which the
// proxy then dials for it.
func (p *CutProxy) Via(serverURL string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", err
	}
	if u.Host == "" {
		return "", errors.New("clustertest: no host:port in " + serverURL)
	}
	p.mu.Lock()
	p.target = u.Host
	p.mu.Unlock()
	u.Host = p.ln.Addr().String()
	return u.String(), nil
}

func (p *CutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target, closed := p.target, p.closed
		p.mu.Unlock()
		if closed || target == "" {
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

// pipe copies src to dst, holding what it read while the link is cut.
func (p *CutProxy) pipe(src, dst net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.isCut && !p.closed {
				p.cond.Wait()
			}
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Cut stops the bytes both ways, holding the connections open.
func (p *CutProxy) Cut() {
	p.mu.Lock()
	p.isCut = true
	p.mu.Unlock()
}

// Restore passes the bytes again.
func (p *CutProxy) Restore() {
	p.mu.Lock()
	p.isCut = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Close closes the listener and every connection.
func (p *CutProxy) Close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = nil
	p.cond.Broadcast()
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range conns {
		c.Close()
	}
}
