//go:build !linux

package nodefence

import "github.com/pmixbus/pmixbus/pmix"

// segment: there is no memfd nor futex here; New fails and fences take
// the agent's path.
type segment struct {
	fd int
	n  uint32
}

func newSegment(uint32, uint32) (*segment, error) {
	return nil, pmix.Errorf(pmix.ErrNotSupported, "node fence: shared-memory barriers need Linux")
}

func (s *segment) gen() uint32              { return 1 }
func (s *segment) addGen(uint32)            {}
func (s *segment) addArrived(uint32) uint32 { return 0 }
func (s *segment) storeArrived(uint32)      {}
func (s *segment) status() int32            { return 0 }
func (s *segment) casStatus(int32)          {}
func (s *segment) wake()                    {}
func (s *segment) wait(uint32)              {}
func (s *segment) close()                   {}
func (s *segment) dup() int                 { return -1 }
