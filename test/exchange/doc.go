// Package exchange holds pmixbus's end-to-end tests of what ranks
// exchange: fences and connects (also across a cut), groups, job-level
// info, publish/lookup and GLOBAL data, the client API's other calls
// (query, log, job control), and what NATS lets a connection do without
// its key. Real in-process NATS servers (several clusters joined by leaf
// nodes), real agents on real sockets, and clients attached the way
// launched processes attach, in worlds of package internal/e2e.
package exchange
