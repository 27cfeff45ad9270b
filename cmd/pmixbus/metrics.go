package main

import (
	"context"
	"fmt"
	"io"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pmixbus/pmixbus/metrics"
)

const metricsFlagHelp = "serve Prometheus metrics at http://`addr`/metrics (host:port; port 0 picks one); empty serves none (see docs/metrics.md)"

// serveMetrics serves the collectors at addr when addr is set, prints
// where, and returns the function that stops serving.
func serveMetrics(addr string, stdout io.Writer, cs ...prometheus.Collector) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(cs...)
	ep, err := metrics.Serve(addr, reg)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "metrics URL: http://%s/metrics\n", ep.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		_ = ep.Close(ctx)
	}, nil
}
