package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/proto"
	"github.com/pmixbus/pmixbus/subjects"
)

// Config configures an Agent. Start from DefaultConfig.
type Config struct {
	// Cluster is the PMIx cluster the agent belongs to; it names the
	// cluster's JetStream domain too.
	Cluster cluster.ID
	// Node is the node the agent serves. One agent per node.
	Node string

	// NATS connection, in order of precedence: Conn (owned by the caller,
	// not closed by the agent), URL (dialled by the agent), or, when both
	// are empty, an embedded server the agent starts with its store in
	// StoreDir.
	Conn     *nats.Conn
	URL      string
	StoreDir string

	// Listen is where local clients attach: "unix:/path/to.sock" (the
	// default, under the system temp dir) or "tcp:127.0.0.1:port" (port 0
	// picks one). TCP listens on loopback only.
	Listen string

	// MaxFrame bounds the size of a frame a client may send.
	MaxFrame int
	// HandlerTimeout is the registry default for handlers that set no
	// PMIX_EVENT_ACTION_TIMEOUT: a handler that has not completed by then
	// is passed over. Zero waits forever.
	HandlerTimeout time.Duration
	// HelloTimeout bounds how long a new connection may take to
	// authenticate.
	HelloTimeout time.Duration

	// Logger receives the agent's logs. Nil discards them.
	Logger *slog.Logger
}

// DefaultConfig returns a Config for the given cluster and node with an
// embedded NATS server, a Unix socket under os.TempDir, 4 MiB frames and a
// 30 s default handler timeout.
func DefaultConfig(id cluster.ID, node string) Config {
	return Config{
		Cluster:        id,
		Node:           node,
		Listen:         "unix:" + filepath.Join(os.TempDir(), "pmixbus-"+subjects.EscapeToken(string(id))+"-"+subjects.EscapeToken(node)+".sock"),
		MaxFrame:       proto.DefaultMaxFrame,
		HandlerTimeout: 30 * time.Second,
		HelloTimeout:   10 * time.Second,
	}
}

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	var errs []error
	if err := c.Cluster.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("cluster: %w", err))
	}
	if c.Node == "" {
		errs = append(errs, errors.New("node: must not be empty"))
	}
	if _, _, err := splitListen(c.Listen); err != nil {
		errs = append(errs, err)
	}
	if c.MaxFrame < 1024 {
		errs = append(errs, fmt.Errorf("max frame %d: must be at least 1024 bytes", c.MaxFrame))
	}
	if c.HandlerTimeout < 0 {
		errs = append(errs, fmt.Errorf("handler timeout %v: must not be negative", c.HandlerTimeout))
	}
	if c.HelloTimeout <= 0 {
		errs = append(errs, fmt.Errorf("hello timeout %v: must be positive", c.HelloTimeout))
	}
	if c.Conn == nil && c.URL == "" && c.StoreDir == "" {
		errs = append(errs, errors.New("store dir: needed for the embedded NATS server (or give a NATS URL or connection)"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	return nil
}

func splitListen(s string) (network, addr string, err error) {
	network, addr, ok := strings.Cut(s, ":")
	if !ok || addr == "" || (network != "unix" && network != "tcp") {
		return "", "", fmt.Errorf("listen %q: want unix:/path or tcp:127.0.0.1:port", s)
	}
	return network, addr, nil
}
