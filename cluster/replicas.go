package cluster

import "github.com/nats-io/nats.go"

// MaxDefaultReplicas is the largest replica count DefaultReplicas gives:
// three copies survive the loss of one server with a quorum to spare for
// the next write, and more would only slow every write.
const MaxDefaultReplicas = 3

// DefaultReplicas is the replica count pmixbus gives the streams and
// buckets it creates on the cluster nc is connected to: min(3, its
// servers). The servers are those nc knows of: the URLs it was given and
// the client URLs the cluster's servers advertise to one another over
// their routes; a server without routes (no cluster name) is a cluster of
// one. A cluster whose servers do not advertise (no_advertise) and whose
// URLs were not all given looks smaller than it is: name the count then
// (pmixbus agent --replicas).
func DefaultReplicas(nc *nats.Conn) int {
	if nc.ConnectedClusterName() == "" {
		return 1
	}
	return max(1, min(MaxDefaultReplicas, len(nc.Servers())))
}
