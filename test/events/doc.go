// Package events holds pmixbus's end-to-end tests of the event bus: ranges,
// levels and handler chains, the event cache and replay, backlogs and
// floods, a client's lifecycle and its faults, nodes and clusters lost
// (liveness, the hub, the leaf links), and the agent's socket before and
// after hello. Real in-process NATS servers (several clusters joined by
// leaf nodes), real agents on real sockets, and clients attached the way
// launched processes attach, in worlds of package internal/e2e.
package events
