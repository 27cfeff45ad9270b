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
	"strconv"
	"strings"
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

// maxSharedTopology bounds the shared-memory copy the helper reports.
const maxSharedTopology = 64 << 20

// topology is the node's topology as the agent gives it to its clients:
// set by loadTopology before any client attaches, read-only afterwards.
type topology struct {
	xml    string          // PMIX_LOCAL_TOPO; "" gives nothing
	shared *sharedTopology // the helper's shared-memory copy, or nil
	uid    int             // the agent's: the owner of shared's file
}

// sharedTopology is the topology written by hwloc_shmem_topology_write
// into a file of the agent's (mode 0600), which a client of the agent's
// uid maps at addr, size bytes, and adopts (PMIX_HWLOC_SHMEM_*).
type sharedTopology struct {
	path       string
	addr, size uint64
}

func (s *sharedTopology) String() string {
	if s == nil {
		return "none"
	}
	return fmt.Sprintf("%s at %#x, %d bytes", s.path, s.addr, s.size)
}

// loadTopology sets a.topo: the configured XML, else the helper's
// output, else nothing (the ranks then discover the topology
// themselves, as before); a helper that fails is logged, not fatal.
func (a *Agent) loadTopology(ctx context.Context) {
	a.topo.uid = os.Getuid()
	if a.cfg.Topology != "" {
		a.topo.xml = a.cfg.Topology
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
	file, err := newSharedTopologyFile()
	if err != nil {
		a.log.Warn("the node's topology is not shared in memory", "err", err)
	}
	xml, shared, err := runTopologyHelper(ctx, path, file)
	switch {
	case xml == "":
		a.log.Warn("the node's topology is not given to the ranks; they discover it themselves", "helper", path, "err", err)
	case err != nil:
		a.log.Warn("the node's topology is not shared in memory; the ranks load its XML", "helper", path, "err", err)
	}
	if shared == nil && file != "" {
		_ = os.Remove(file)
	}
	a.topo.xml, a.topo.shared = xml, shared
	a.log.Debug("the node's topology, for the ranks", "bytes", len(xml), "shared", shared.String())
}

// newSharedTopologyFile creates the empty file, readable by the agent's
// uid only, that the helper writes the shared topology into: in
// /dev/shm where there is one (memory, not disk), else in the
// temporary directory. An empty path and the error when it cannot.
func newSharedTopologyFile() (string, error) {
	dir := "/dev/shm"
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		dir = os.TempDir()
	}
	f, err := os.CreateTemp(dir, "pmixbus-topology-*.hwloc") // mode 0600
	if err != nil {
		return "", err
	}
	return f.Name(), f.Close()
}

// removeSharedTopology removes the shared topology's file when the agent
// stops. Clients that adopted it keep their mapping.
func (a *Agent) removeSharedTopology() {
	if s := a.topo.shared; s != nil {
		if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			a.log.Warn("removing the shared topology", "path", s.path, "err", err)
		}
	}
}

// runTopologyHelper runs the helper for 10 s at most and checks that it
// printed an hwloc XML topology of bounded size. With a file, the helper
// is asked to write the shared-memory copy there too: its "shmem ADDRESS
// LENGTH" line comes first. A helper that shared nothing, or printed a
// bad line, still gives the XML (shared is nil; a bad line is the error).
func runTopologyHelper(ctx context.Context, path, file string) (xml string, shared *sharedTopology, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out, errs bytes.Buffer
	var args []string
	if file != "" {
		args = []string{"--shmem", file}
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdout, cmd.Stderr = &limited{&out, maxTopology}, &limited{&errs, 4096}
	if err := cmd.Run(); err != nil {
		return "", nil, fmt.Errorf("%w: %s", err, bytes.TrimSpace(errs.Bytes()))
	}
	b := out.Bytes()
	if len(b) >= maxTopology {
		return "", nil, errors.New("its output is over the limit of 4 MiB")
	}
	var line []byte
	if rest, ok := bytes.CutPrefix(b, []byte("shmem ")); ok && file != "" {
		line, b, _ = bytes.Cut(rest, []byte("\n"))
	}
	if !bytes.HasPrefix(b, []byte("<?xml")) || !bytes.Contains(b, []byte("<topology")) {
		return "", nil, errors.New("its output is not an hwloc XML topology")
	}
	if line == nil {
		return string(b), nil, nil
	}
	shared, err = parseSharedTopology(string(line), file)
	return string(b), shared, err
}

// parseSharedTopology reads the helper's "ADDRESS LENGTH" (after
// "shmem ") about file: a page-aligned, non-null address and a length
// the file holds, of at most maxSharedTopology.
func parseSharedTopology(line, file string) (*sharedTopology, error) {
	f := strings.Fields(line)
	if len(f) != 2 {
		return nil, fmt.Errorf("shared topology: %q is not an address and a length", line)
	}
	addr, err1 := strconv.ParseUint(f[0], 0, 64)
	size, err2 := strconv.ParseUint(f[1], 10, 64)
	page := uint64(os.Getpagesize())
	switch {
	case err1 != nil || err2 != nil:
		return nil, fmt.Errorf("shared topology: %q is not an address and a length", line)
	case addr == 0 || addr%page != 0 || size == 0 || size%page != 0 || size > maxSharedTopology || addr+size < addr:
		return nil, fmt.Errorf("shared topology: address %#x and length %d are not page-aligned and bounded", addr, size)
	}
	st, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("shared topology: %w", err)
	}
	if uint64(st.Size()) < size {
		return nil, fmt.Errorf("shared topology: %s holds %d bytes, not %d", file, st.Size(), size)
	}
	return &sharedTopology{path: file, addr: addr, size: size}, nil
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

// withTopology adds PMIX_LOCAL_TOPO to the attach info of a client
// whose process runs as uid, unless there is none or the host gave one;
// and the shared-memory copy's PMIX_HWLOC_SHMEM_* beside it when the
// client can read its file (the agent's uid, or root). Open MPI 4.1
// treats a file it cannot open as an error, not as a reason to read
// the XML.
func (a *Agent) withTopology(info []pmix.Info, uid int) []pmix.Info {
	t := &a.topo
	if t.xml == "" {
		return info
	}
	if _, given := pmix.Lookup(info, pmix.KeyLocalTopo); given {
		return info
	}
	info = append(slices.Clip(info), pmix.NewInfo(pmix.KeyLocalTopo, pmix.String(t.xml)))
	if s := t.shared; s != nil && (uid == t.uid || uid == 0) {
		info = append(info,
			pmix.NewInfo(pmix.KeyHwlocShmemFile, pmix.String(s.path)),
			pmix.NewInfo(pmix.KeyHwlocShmemAddr, pmix.Uint64(s.addr)),
			pmix.NewInfo(pmix.KeyHwlocShmemSize, pmix.Uint64(s.size)))
	}
	return info
}
