// Package liveness is how the agents of a cluster find each other and
// notice one that died: the launch service's liveness part (DESIGN.md,
// package launch: "liveness of agents (node down)"; docs/liveness.md).
//
// Every agent keeps a key in its cluster's KV bucket PMIXBUS_AGENTS (in
// the cluster's own JetStream domain): its node, slots, version, where it
// listens, when it started, and the jobs whose ranks its node hosts
// (Record). The key has a TTL of its own (JetStream's per-message TTL),
// which every refresh resets; the bucket keeps limit markers, so when an
// agent stops refreshing, the server removes its key and every watcher
// sees the expiry. No heartbeat protocol of our own: NATS keeps time.
//
// Every agent watches the bucket. When a key expires, each raises, for
// every job the node hosted, PMIX_EVENT_NODE_DOWN to the job and
// PMIX_ERR_PROC_TERM_WO_SYNC for each of its procs there (Events), with
// ids derived from the expiry marker's revision: the same on every agent,
// so the agents of the jobs run each event once and the event cache keeps
// one copy. No leader is elected. An agent that stops cleanly deletes its
// key first (Shutdown), and nothing is raised for it.
//
// An agent embeds a Service, handing it its connection and a Host (the
// jobs it hosts, and how to publish an event):
//
//	cfg := liveness.DefaultConfig()
//	cfg.Conn, cfg.Cluster, cfg.Node, cfg.Listen, cfg.Host = nc, "A", "n1", addr, host
//	svc, err := liveness.New(cfg)
//	err = svc.Start(ctx)              // claims the key, watches the others
//	svc.OnNodeDown(func(d liveness.NodeDown) { … })
//	err = svc.Refresh(ctx)            // the hosted jobs changed
//	err = svc.Shutdown(ctx)           // clean stop: deletes the key
//
// Tools read a cluster's bucket with ReadAgents, and find the reachable
// clusters with Clusters (`pmixbus status`).
//
// A Service is safe for concurrent use. It owns two goroutines (the
// refresh loop and the watch loop) and, after its own connection was
// down, one per expiry it waits to confirm; Shutdown stops and waits for
// them all.
package liveness
