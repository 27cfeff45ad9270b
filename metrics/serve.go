package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Endpoint is an HTTP server of /metrics.
type Endpoint struct {
	srv  *http.Server
	addr string
	done chan struct{}
}

// Serve serves the registry's metrics at http://addr/metrics (port 0
// picks one; Addr tells which) until Close.
//
// Errors: the listen error, wrapped with the address.
func Serve(addr string, reg *prometheus.Registry) (*Endpoint, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listening on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	e := &Endpoint{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		addr: ln.Addr().String(),
		done: make(chan struct{}),
	}
	go func() {
		defer close(e.done)
		_ = e.srv.Serve(ln)
	}()
	return e, nil
}

// Addr is the address served, host:port.
func (e *Endpoint) Addr() string { return e.addr }

// Close stops serving, waiting within ctx for scrapes in progress.
func (e *Endpoint) Close(ctx context.Context) error {
	err := e.srv.Shutdown(ctx)
	<-e.done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
