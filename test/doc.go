// Package test holds pmixbus's end-to-end tests: real in-process NATS
// servers (several clusters joined by leaf nodes), real agents on real
// sockets, and clients attached the way launched processes attach — a
// world started with package agenttest (harness_test.go).
package test
