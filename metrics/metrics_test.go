package metrics_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/metrics"
)

// A scrape returns the agent's and the server's metrics in the Prometheus
// text format.
func TestScrape(t *testing.T) {
	srv := clustertest.StartServer(t, "A")
	dir, err := os.MkdirTemp("", "pxm")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cfg := agent.DefaultConfig("A", "n1")
	cfg.URL = srv.ClientURL()
	cfg.Listen = "unix:" + filepath.Join(dir, "a.sock")
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.Shutdown(ctx)
	}()

	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.Agent(a, "A", "n1"), metrics.Server(srv))
	ep, err := metrics.Serve("127.0.0.1:0", reg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ep.Close(context.Background()) }()
	resp, err := http.Get("http://" + ep.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	text := string(body)
	for _, want := range []string{
		`pmixbus_agent_clients_attached{cluster="A",node="n1"} 0`,
		`pmixbus_agent_nats_connected{cluster="A",node="n1"} 1`,
		`# TYPE pmixbus_agent_events_dropped_total counter`,
		`pmixbus_nats_connections{cluster="A",server="A"} 1`,
		`# TYPE pmixbus_nats_slow_consumers_total counter`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
}
