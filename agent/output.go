package agent

import (
	"context"

	"github.com/pmixbus/pmixbus/iof"
)

// The agent's output service (package iof): it stores what the processes
// the agent launches write, and what its clients log, in the cluster's
// output stream, from which launchers and viewers read it.

// startOutput opens the cluster's output stream.
func (a *Agent) startOutput(ctx context.Context) error {
	svc, err := iof.Open(ctx, iof.ServiceConfig{
		Conn: a.nc, Cluster: string(a.cfg.Cluster), Memory: a.cfg.CacheMemory,
		MaxAge: a.cfg.OutputMaxAge, StreamBytes: a.cfg.OutputStreamBytes, Replicas: a.replicas,
		Logger: a.log.With("service", "iof"),
	})
	if err != nil {
		return err
	}
	a.output = svc
	return nil
}

// stopOutput drops what the output service has not stored yet; the
// processes it captured have ended by now.
func (a *Agent) stopOutput() {
	if a.output != nil {
		a.output.Close()
	}
}
