package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/pmixbus/pmixbus/pmix"
)

// TopologyHelper is the program, in PMIxLibDir, that prints the node's
// hwloc topology as XML (cabi/topology; make builds it beside
// libpmix.so.2 where libhwloc-dev is installed).
const TopologyHelper = "pmixbus-topology"

// maxTopology bounds the XML the agent takes from the helper: a node of
// hundreds of cores without its I/O devices is well under it.
const maxTopology = 4 << 20

// loadTopology sets a.topology: the configured XML, else the helper's
// output, else nothing (the ranks then discover the topology
// themselves, as before); a helper that fails is logged, not fatal.
func (a *Agent) loadTopology(ctx context.Context) {
	if a.cfg.Topology != "" {
		a.topology = a.cfg.Topology
		return
	}
	if a.cfg.PMIxLibDir == "" {
		return
	}
	path := filepath.Join(a.cfg.PMIxLibDir, TopologyHelper)
	if _, err := os.Stat(path); err != nil {
		a.log.Debug("no topology helper: ranks discover the node's topology themselves", "path", path)
		return
	}
	xml, err := runTopologyHelper(ctx, path)
	if err != nil {
		a.log.Warn("the node's topology is not given to the ranks; they discover it themselves", "helper", path, "err", err)
		return
	}
	a.topology = xml
	a.log.Debug("the node's topology, for the ranks", "bytes", len(xml))
}

// runTopologyHelper runs the helper for 10 s at most and checks that it
// printed an hwloc XML topology of bounded size.
func runTopologyHelper(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out, errs bytes.Buffer
	cmd := exec.CommandContext(ctx, path)
	cmd.Stdout, cmd.Stderr = &limited{&out, maxTopology}, &limited{&errs, 4096}
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: %s", err, bytes.TrimSpace(errs.Bytes()))
	}
	xml := out.Bytes()
	if len(xml) >= maxTopology {
		return "", errors.New("its output is over the limit of 4 MiB")
	}
	if !bytes.HasPrefix(xml, []byte("<?xml")) || !bytes.Contains(xml, []byte("<topology")) {
		return "", errors.New("its output is not an hwloc XML topology")
	}
	return string(xml), nil
}

// limited keeps at most n bytes, and says it took everything.
type limited struct {
	b *bytes.Buffer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.n - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// withTopology adds PMIX_LOCAL_TOPO to a client's attach info, unless
// there is none or the host gave one.
func (a *Agent) withTopology(info []pmix.Info) []pmix.Info {
	if a.topology == "" {
		return info
	}
	if _, given := pmix.Lookup(info, pmix.KeyLocalTopo); given {
		return info
	}
	return append(slices.Clip(info), pmix.NewInfo(pmix.KeyLocalTopo, pmix.String(a.topology)))
}
