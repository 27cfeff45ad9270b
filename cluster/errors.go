package cluster

import "errors"

var (
	// ErrInvalidID is returned for a cluster id that is empty, too long or
	// contains a character other than ASCII letters, digits, '-' and '_'.
	ErrInvalidID = errors.New("cluster: invalid cluster id")

	// ErrInvalidConfig is returned by the Validate methods, and by the Start
	// functions that call them, for a configuration that cannot work.
	ErrInvalidConfig = errors.New("cluster: invalid configuration")

	// ErrNotReady is returned when a server or topology did not become ready
	// (JetStream answering, leaf links up, messages flowing) before its
	// context or ready timeout ended.
	ErrNotReady = errors.New("cluster: not ready")

	// ErrRunning is returned by Restart for a server that has not been shut
	// down.
	ErrRunning = errors.New("cluster: server is running")

	// ErrNotRunning is returned by SetLeafLinks for a server that is not
	// running.
	ErrNotRunning = errors.New("cluster: server is not running")

	// ErrNoTop is returned by TopDomain when no server at the top of the
	// topology answered.
	ErrNoTop = errors.New("cluster: no server at the top of the topology answered")

	// ErrClosed is returned for an operation on a Cluster or MultiCluster
	// after its Shutdown began.
	ErrClosed = errors.New("cluster: shut down")

	// ErrStoreInUse is returned by StartServer and Restart for a store
	// directory that another running server holds (in this process or
	// another); the message names its pid. Nothing of the store is read.
	ErrStoreInUse = errors.New("cluster: store dir in use by another server")
)
