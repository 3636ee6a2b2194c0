package memory

import (
	"encoding/hex"
	"hash/maphash"
	"math"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
)

// consumptionLog holds every consumption the store has charged: the store's
// largest state, which grows by one row on every call. It is laid out for the
// garbage collector, which otherwise spends more time marking old
// consumptions than the store spends charging new ones:
//
//   - rows are fixed-size records without pointers, kept in chunks;
//   - the names a row repeats (agent, entitlement, service, tool, entitlement
//     type, currencies) are interned once, and a row holds their numbers;
//   - idempotency keys are copied into a byte arena;
//   - the index from (agent, key) to a row is a map of integers: a hash of the
//     pair to the newest row with that hash, older rows with the same hash
//     chained through the rows. A lookup compares the row's agent and key, so
//     a hash collision costs a step along the chain, never a wrong answer.
//
// None of it is scanned by the garbage collector, and adding a row allocates
// nothing but the occasional new chunk. Callers hold the store's mutex.
type consumptionLog struct {
	seed   maphash.Seed
	index  map[uint64]row
	chunks [][]record
	len    int
	keys   arena
	names  interner
}

// row numbers a record: 1 is the first; 0 is none.
type row uint32

const (
	chunkBits = 10
	chunkSize = 1 << chunkBits
)

// record is one stored consumption; see entitlement.Consumption. It keeps
// the parameters of the request that made it (those the fingerprint covers)
// rather than the fingerprint, which is derived from them when a consumption
// is read back: a charge, the hot path, never computes one.
type record struct {
	id uuid.UUID
	// next is the older row with the same index hash, or 0.
	next row
	// occurredAt, in UTC, as Unix seconds and nanoseconds.
	sec  int64
	nsec int32

	units, costCents, balanceCents, remaining int64
	hasRemaining                              bool

	agent, entitlement, service, tool, kind, costCurrency, balanceCurrency name
	key                                                                    span

	// The request's entitlement ID (0 when it named none) and cost (currency
	// 0 when it had none: a cost always has a currency).
	reqEntitlement, reqCostCurrency name
	reqCostCents                    int64
}

func newConsumptionLog() consumptionLog {
	return consumptionLog{
		seed:  maphash.MakeSeed(),
		index: make(map[uint64]row),
		names: newInterner(),
	}
}

func (l *consumptionLog) hash(agentID, key string) uint64 {
	var h maphash.Hash
	h.SetSeed(l.seed)
	h.WriteString(agentID)
	h.WriteByte(0) // agent IDs are printable ASCII: the pair is unambiguous
	h.WriteString(key)
	return h.Sum64()
}

// at returns the record of r, which must exist.
func (l *consumptionLog) at(r row) *record {
	i := int(r) - 1
	return &l.chunks[i>>chunkBits][i&(chunkSize-1)]
}

// slot is where a new consumption of an (agent, key) pair goes in the
// index: the pair's hash, which a consume computes before it takes the
// mutex, and the newest row with that hash, which find fills in.
type slot struct {
	hash uint64
	head row
}

func (l *consumptionLog) slot(agentID, key string) slot {
	return slot{hash: l.hash(agentID, key)}
}

// find returns the row of the agent's consumption for key, or 0, and sets
// sl.head for add. sl.hash is l.hash(agentID, key).
func (l *consumptionLog) find(sl *slot, agentID, key string) row {
	sl.head = l.index[sl.hash]
	for r := sl.head; r != 0; {
		rec := l.at(r)
		if l.names.str(rec.agent) == agentID && string(l.keys.bytes(rec.key)) == key {
			return r
		}
		r = rec.next
	}
	return 0
}

// full reports whether the log holds as many rows as a row number can
// count (about four billion: hundreds of gigabytes, far past what a
// development store sees). add must not be called then.
func (l *consumptionLog) full() bool { return l.len == math.MaxUint32 }

// add stores c, whose ID is id and which req made, and returns its row.
// find(sl, c.AgentID, c.IdempotencyKey) has just returned 0.
func (l *consumptionLog) add(sl *slot, c *entitlement.Consumption, id uuid.UUID, req *entitlement.ConsumeRequest) row {
	if l.len&(chunkSize-1) == 0 {
		l.chunks = append(l.chunks, make([]record, chunkSize))
	}
	l.len++
	r := row(l.len)
	rec := l.at(r)
	*rec = record{
		id:              id,
		next:            sl.head,
		sec:             c.OccurredAt.Unix(),
		nsec:            int32(c.OccurredAt.Nanosecond()),
		units:           c.Units,
		costCents:       c.Cost.Cents,
		balanceCents:    c.BalanceAfter.Cents,
		agent:           l.names.intern(nameAgent, c.AgentID),
		entitlement:     l.names.intern(nameEntitlement, c.EntitlementID),
		service:         l.names.intern(nameService, c.Service),
		tool:            l.names.intern(nameTool, c.Tool),
		kind:            l.names.intern(nameKind, string(c.EntitlementType)),
		costCurrency:    l.names.intern(nameCostCurrency, c.Cost.Currency),
		balanceCurrency: l.names.intern(nameBalanceCurrency, c.BalanceAfter.Currency),
		key:             l.keys.add(c.IdempotencyKey),
		reqEntitlement:  l.names.intern(nameReqEntitlement, req.EntitlementID),
	}
	if req.Cost != nil {
		rec.reqCostCents = req.Cost.Cents
		rec.reqCostCurrency = l.names.intern(nameCostCurrency, req.Cost.Currency)
	}
	if c.RemainingAfter != nil {
		rec.remaining, rec.hasRemaining = *c.RemainingAfter, true
	}
	l.index[sl.hash] = r
	sl.head = r
	return r
}

// consumption returns r's consumption; it shares nothing with the log.
func (l *consumptionLog) consumption(r row) entitlement.Consumption {
	rec := l.at(r)
	// The ID and the key share one allocation.
	key := l.keys.bytes(rec.key)
	buf := make([]byte, 0, uuidLen+len(key))
	buf = appendUUID(buf, rec.id)
	buf = append(buf, key...)
	s := string(buf)
	c := entitlement.Consumption{
		ID:              s[:uuidLen],
		AgentID:         l.names.str(rec.agent),
		EntitlementID:   l.names.str(rec.entitlement),
		EntitlementType: entitlement.Type(l.names.str(rec.kind)),
		Service:         l.names.str(rec.service),
		Tool:            l.names.str(rec.tool),
		IdempotencyKey:  s[uuidLen:],
		Cost:            money.Money{Cents: rec.costCents, Currency: l.names.str(rec.costCurrency)},
		Units:           rec.units,
		OccurredAt:      rec.occurredAt(),
		BalanceAfter:    money.Money{Cents: rec.balanceCents, Currency: l.names.str(rec.balanceCurrency)},
	}
	if rec.hasRemaining {
		rem := rec.remaining
		c.RemainingAfter = &rem
	}
	req := l.request(rec)
	c.Fingerprint = req.Fingerprint()
	return c
}

// request rebuilds the parameters of the request that made rec.
func (l *consumptionLog) request(rec *record) entitlement.ConsumeRequest {
	req := entitlement.ConsumeRequest{
		AgentID:       l.names.str(rec.agent),
		Service:       l.names.str(rec.service),
		Tool:          l.names.str(rec.tool),
		Units:         rec.units,
		EntitlementID: l.names.str(rec.reqEntitlement),
	}
	if rec.reqCostCurrency != 0 {
		req.Cost = &money.Money{Cents: rec.reqCostCents, Currency: l.names.str(rec.reqCostCurrency)}
	}
	return req
}

func (rec *record) occurredAt() time.Time { return time.Unix(rec.sec, int64(rec.nsec)).UTC() }

// before orders rows as lists show them: by time, then ID. UUIDs compare
// as bytes in the order of their text form.
func (l *consumptionLog) before(a, b row) bool {
	ra, rb := l.at(a), l.at(b)
	switch {
	case ra.sec != rb.sec:
		return ra.sec < rb.sec
	case ra.nsec != rb.nsec:
		return ra.nsec < rb.nsec
	}
	return string(ra.id[:]) < string(rb.id[:])
}

// pos is r's list position, for cursors.
func (l *consumptionLog) pos(r row) position {
	rec := l.at(r)
	return position{rec.occurredAt(), rec.id.String()}
}

// interner numbers strings; 0 is "". It remembers the last string of each
// record field, because consecutive calls mostly repeat them (one agent
// calling one tool): comparing with the last is cheaper than a map lookup.
type interner struct {
	ids  map[string]name
	strs []string
	last [nameFields]struct {
		s string
		n name
	}
}

type name uint32

// The record fields that hold names.
const (
	nameAgent = iota
	nameEntitlement
	nameService
	nameTool
	nameKind
	nameCostCurrency
	nameBalanceCurrency
	nameReqEntitlement
	nameFields
)

func newInterner() interner {
	return interner{ids: make(map[string]name), strs: []string{""}}
}

// intern returns the number of s, which is stored in record field field.
func (in *interner) intern(field int, s string) name {
	if s == "" {
		return 0
	}
	last := &in.last[field]
	if last.s == s {
		return last.n
	}
	n, ok := in.ids[s]
	if !ok {
		s = strings.Clone(s) // do not keep the request that s may point into
		n = name(len(in.strs))
		in.strs = append(in.strs, s)
		in.ids[s] = n
	}
	last.s, last.n = in.strs[n], n
	return n
}

func (in *interner) str(n name) string { return in.strs[n] }

// arena holds short strings in large byte chunks that the garbage collector
// does not scan.
type arena struct{ chunks [][]byte }

// arenaChunk is the size of a chunk; a span's offset and length fit 16 bits.
const arenaChunk = 1 << 16

type span struct {
	chunk    uint32
	off, len uint16
}

// add copies s, which is at most entitlement.MaxKeyLength bytes, into the arena.
func (a *arena) add(s string) span {
	n := len(a.chunks)
	if n == 0 || cap(a.chunks[n-1])-len(a.chunks[n-1]) < len(s) {
		a.chunks = append(a.chunks, make([]byte, 0, arenaChunk))
		n++
	}
	c := a.chunks[n-1]
	sp := span{chunk: uint32(n - 1), off: uint16(len(c)), len: uint16(len(s))}
	a.chunks[n-1] = append(c, s...)
	return sp
}

func (a *arena) bytes(sp span) []byte {
	return a.chunks[sp.chunk][sp.off : int(sp.off)+int(sp.len)]
}

// The arena's spans must be able to hold any idempotency key.
var _ [arenaChunk - entitlement.MaxKeyLength]struct{}

const uuidLen = 36

// appendUUID appends u in its text form (what uuid.UUID.String returns).
func appendUUID(b []byte, u uuid.UUID) []byte {
	b = hex.AppendEncode(b, u[:4])
	b = append(b, '-')
	b = hex.AppendEncode(b, u[4:6])
	b = append(b, '-')
	b = hex.AppendEncode(b, u[6:8])
	b = append(b, '-')
	b = hex.AppendEncode(b, u[8:10])
	b = append(b, '-')
	return hex.AppendEncode(b, u[10:])
}
