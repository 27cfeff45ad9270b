//go:build !unix

package bench

// raiseFileLimit leaves the limits of systems without rlimits alone.
func raiseFileLimit(uint64) error { return nil }
