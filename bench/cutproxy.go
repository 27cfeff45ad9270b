package bench

import (
	"errors"
	"net"
	"net/url"
	"sync"
)

// cutProxy stands between one agent and its NATS server, as the agent's
// network link: cut makes it stop passing bytes either way without
// closing anything, as a switch port that goes down does (no FIN, no
// RST: each side learns of it only by what stops arriving); restore
// passes them again, what was held first.
type cutProxy struct {
	ln net.Listener

	mu     sync.Mutex
	cond   *sync.Cond
	target string // host:port of the server, set before the agent dials
	isCut  bool
	closed bool
	conns  []net.Conn
}

func newCutProxy() (*cutProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &cutProxy{ln: ln}
	p.cond = sync.NewCond(&p.mu)
	go p.serve()
	return p, nil
}

// via returns the URL to give the agent instead of serverURL, which the
// proxy then dials for it.
func (p *cutProxy) via(serverURL string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", err
	}
	if u.Host == "" {
		return "", errors.New("bench: no host:port in " + serverURL)
	}
	p.mu.Lock()
	p.target = u.Host
	p.mu.Unlock()
	u.Host = p.ln.Addr().String()
	return u.String(), nil
}

func (p *cutProxy) serve() {
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
func (p *cutProxy) pipe(src, dst net.Conn) {
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

func (p *cutProxy) cut() {
	p.mu.Lock()
	p.isCut = true
	p.mu.Unlock()
}

func (p *cutProxy) restore() {
	p.mu.Lock()
	p.isCut = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *cutProxy) close() {
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
