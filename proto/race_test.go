//go:build race

package proto

// raceEnabled: the race detector makes sync.Pool drop what it is given
// now and then, so allocation counts do not hold.
const raceEnabled = true
