package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// The local NATS: every agent and server of this host registers where its
// NATS server is, in a file of its own under <state dir>/local (private to
// the user), so that `pmixbus run`, `status`, `attach` and `watch` reach
// it with no --nats. Two agents on one host (two clusters, two nodes)
// each have their file; a tool picks the one of the cluster it names,
// and with several and none named it refuses, listing them. PMIXBUS_NATS
// and --nats win over it. Without any, a tool says so: it never falls
// back to a server nobody named (127.0.0.1:4222 may be another user's).

// localEndpoint is one local agent's or server's registration.
type localEndpoint struct {
	Kind    string `json:"kind"` // "agent" or "server"
	Cluster string `json:"cluster"`
	Name    string `json:"name"` // the agent's node, the server's name
	URL     string `json:"url"`  // its NATS server's client URL
	Pid     int    `json:"pid"`
}

func (e localEndpoint) String() string {
	return fmt.Sprintf("%s %s of cluster %s (%s, pid %d)", e.Kind, e.Name, e.Cluster, e.URL, e.Pid)
}

// defaultStateDir is where pmixbus keeps its state when not told:
// $XDG_STATE_HOME/pmixbus, else /var/lib/pmixbus for root, else
// ~/.local/state/pmixbus. Never the temp dir, which anyone may fill
// (a file named pmixbus there would stop every agent).
func defaultStateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "pmixbus"), nil
	}
	if os.Geteuid() == 0 {
		return "/var/lib/pmixbus", nil
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return "", errors.New("no state directory: set XDG_STATE_HOME or HOME, or give --store")
	}
	return filepath.Join(home, ".local", "state", "pmixbus"), nil
}

// localDir is the directory of the local registrations.
func localDir() (string, error) {
	d, err := defaultStateDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "local"), nil
}

// registerLocal writes e's registration and returns the function that
// removes it.
func registerLocal(e localEndpoint) (remove func(), err error) {
	dir, err := localDir()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	e.Pid = os.Getpid()
	b, _ := json.Marshal(e)
	name := filepath.Join(dir, url.PathEscape(e.Kind+"."+e.Cluster+"."+e.Name)+"."+strconv.Itoa(e.Pid)+".json")
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, name); err != nil {
		return nil, err
	}
	return func() { _ = os.Remove(name) }, nil
}

// localEndpoints lists the registrations of live processes, of cluster
// when it is not empty. A registration whose process is gone (killed
// without cleaning up) is removed.
func localEndpoints(cluster string) ([]localEndpoint, string) {
	dir, err := localDir()
	if err != nil {
		return nil, ""
	}
	entries, _ := os.ReadDir(dir)
	var out []localEndpoint
	for _, de := range entries {
		if !strings.HasSuffix(de.Name(), ".json") {
			continue
		}
		path := filepath.Join(dir, de.Name())
		b, err := os.ReadFile(path)
		if err != nil || len(b) > 64<<10 {
			continue
		}
		var e localEndpoint
		if json.Unmarshal(b, &e) != nil || e.URL == "" || e.Pid <= 0 {
			continue
		}
		if !processAlive(e.Pid) {
			_ = os.Remove(path)
			continue
		}
		if cluster == "" || e.Cluster == cluster {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b localEndpoint) int { return strings.Compare(a.String(), b.String()) })
	return out, dir
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// localNATSFlag declares --nats for a tool that finds the local NATS by
// itself: what applyLocalNATS resolves.
func localNATSFlag(fs *flag.FlagSet, of string) *string {
	return fs.String("nats", "", "NATS `URL` of any server "+of+" (PMIXBUS_NATS; default: the server of the local agent, of the --cluster given when there are several)")
}

// applyLocalNATS gives a --nats flag declared by localNATSFlag its value
// when the command line did not: PMIXBUS_NATS, else localNATS(cluster).
func applyLocalNATS(fs *flag.FlagSet, url *string, cluster string) error {
	if err := (envBindings{"nats": "PMIXBUS_NATS"}).apply(fs); err != nil {
		return err
	}
	if *url != "" {
		return nil
	}
	u, err := localNATS(cluster)
	*url = u
	return err
}

// localNATS is the URL of the NATS server of the local agents (or
// servers) of cluster, any cluster when empty, when they share one.
//
// Errors: none registered, or several servers and no way to choose.
func localNATS(cluster string) (string, error) {
	eps, dir := localEndpoints(cluster)
	of := ""
	if cluster != "" {
		of = " of cluster " + cluster
	}
	var urls []string
	for _, e := range eps {
		if !slices.Contains(urls, e.URL) {
			urls = append(urls, e.URL)
		}
	}
	switch len(urls) {
	case 1:
		return urls[0], nil
	case 0:
		return "", fmt.Errorf("no NATS server named and no pmixbus agent or server%s running on this host (none registered in %s): give the URL of one with --nats or PMIXBUS_NATS", of, dir)
	}
	list := make([]string, len(eps))
	for i, e := range eps {
		list[i] = e.String()
	}
	hint := "name the cluster with --cluster or the server with --nats"
	if cluster != "" {
		hint = "name the server with --nats"
	}
	return "", fmt.Errorf("%d local pmixbus NATS servers%s, and none named: %s; %s", len(urls), of, strings.Join(list, "; "), hint)
}

// localAgentsAt lists the local agents whose NATS server is at url.
func localAgentsAt(url string) []localEndpoint {
	eps, _ := localEndpoints("")
	var out []localEndpoint
	for _, e := range eps {
		if e.Kind == "agent" && e.URL == url {
			out = append(out, e)
		}
	}
	return out
}
