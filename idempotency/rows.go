package idempotency

import (
	"context"
	"time"

	"github.com/stipend-mcp/stipend/internal/fault"
)

// DefaultProbeTimeout bounds a backend's Probe when the caller's context
// has no earlier deadline.
const DefaultProbeTimeout = 2 * time.Second

// Rows is what every ledger backend (memledger, fsledger, pgledger) shares
// besides its storage: the name of its rows (its backend and the
// deployment's collection, in references), its clock, and the bound of
// its Probe; and the checks of the operator's calls made with them. A
// backend keeps one and adds only how its rows are stored.
type Rows struct {
	backend, collection string
	now                 func() time.Time
	probeTimeout        time.Duration
}

// RowsOption configures the Rows of a backend; each backend's Option is
// one.
type RowsOption func(*Rows)

// WithRowsClock makes the backend read time from now instead of time.Now
// (for createdAt, completedAt and expiry checks).
func WithRowsClock(now func() time.Time) RowsOption { return func(r *Rows) { r.now = now } }

// WithRowsProbeTimeout sets the bound of Probe (DefaultProbeTimeout
// otherwise).
func WithRowsProbeTimeout(d time.Duration) RowsOption {
	return func(r *Rows) { r.probeTimeout = d }
}

// NewRows returns the Rows of a ledger of backend whose rows belong to
// collection (CollectionName of the deployment namespace).
func NewRows(backend, collection string, opts ...RowsOption) Rows {
	r := Rows{backend: backend, collection: collection, now: time.Now, probeTimeout: DefaultProbeTimeout}
	for _, o := range opts {
		o(&r)
	}
	return r
}

// Collection returns the collection the rows belong to.
func (r Rows) Collection() string { return r.collection }

// Now is the backend's clock, in UTC.
func (r Rows) Now() time.Time { return r.now().UTC() }

// Reference is Ledger.Reference: "<backend>/<collection>/<id>".
func (r Rows) Reference(id string) string { return FormatReference(r.backend, r.collection, id) }

// ID returns the id of the row ref names, or an Invalid error when ref is
// malformed or names another backend or collection.
func (r Rows) ID(ref string) (string, error) { return CheckReference(ref, r.backend, r.collection) }

// CompletionID checks the arguments of a ResolveComplete and returns the
// id of the row ref names.
func (r Rows) CompletionID(ref string, resp Response, expireAt time.Time) (string, error) {
	return CheckResolveComplete(ref, r.backend, r.collection, resp, expireAt)
}

// Names implements the two methods of Ledger that every backend answers
// alike: Reference, from the backend and the collection of its rows, and
// Inspect, the backend's Get of the row a reference names. A backend
// embeds the Names of its Rows.
type Names struct {
	rows Rows
	get  func(context.Context, string) (Record, error)
}

// Names returns the Names of r for a backend whose Get is get.
func (r Rows) Names(get func(context.Context, string) (Record, error)) Names {
	return Names{rows: r, get: get}
}

// Reference implements Ledger: "<backend>/<collection>/<id>".
func (n Names) Reference(id string) string { return n.rows.Reference(id) }

// Inspect implements Ledger: the row ref names, read with the backend's
// Get.
func (n Names) Inspect(ctx context.Context, ref string) (Record, error) {
	id, err := n.rows.ID(ref)
	if err != nil {
		return Record{}, err
	}
	return n.get(ctx, id)
}

// Probe is Ledger.Probe: check, within the probe's bound, answers whether
// the backend is reachable and readable; any error is Unavailable.
func (r Rows) Probe(ctx context.Context, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, r.probeTimeout)
	defer cancel()
	if err := check(ctx); err != nil {
		return fault.Wrap(fault.CodeUnavailable, err, "probe %s", r.Reference(""))
	}
	return nil
}

// Found is what Reserve answers for an existing row that has not expired:
// Mismatch when a different request made it, Replay when it is completed,
// InProgress otherwise.
func Found(existing Record, a Attempt) Result {
	switch {
	case existing.Fingerprint != a.Fingerprint:
		return Result{Outcome: Mismatch, Record: existing}
	case existing.State == StateCompleted:
		return Result{Outcome: Replay, Record: existing}
	default:
		return Result{Outcome: InProgress, Record: existing}
	}
}

// Holds reports whether r still is the reservation res: in progress under
// its token.
func (r Record) Holds(res Reservation) bool {
	return r.Token == res.Token && r.State == StateInProgress
}

// FenceClaim is what every backend's fence holds of its reservation: the
// row's reference and the reservation, which name the claim.
type FenceClaim struct {
	Reference   string
	Reservation Reservation
}

// Claim implements store.Fence.
func (c FenceClaim) Claim() string { return c.Reference + "#" + c.Reservation.Token }
