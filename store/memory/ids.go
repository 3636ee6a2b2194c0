package memory

import (
	"crypto/rand"
	"encoding/binary"
	"sync/atomic"

	"github.com/google/uuid"
)

// idSource makes consumption IDs shaped like version 4 UUIDs: a random
// prefix chosen when the store starts and a counter. They are unique, which
// is all an ID must be, and cost no system call on the hot path, unlike
// uuid.New, which reads the kernel's random source each time.
type idSource struct {
	prefix [8]byte
	n      atomic.Uint64
}

// init picks the random prefix.
func (s *idSource) init() {
	_, _ = rand.Read(s.prefix[:]) // crypto/rand.Read never fails
}

func (s *idSource) next() uuid.UUID {
	var u uuid.UUID
	copy(u[:8], s.prefix[:])
	binary.BigEndian.PutUint64(u[8:], s.n.Add(1))
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return u
}
