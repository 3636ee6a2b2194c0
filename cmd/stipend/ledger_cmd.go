package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/idempotency/fsledger"
	"github.com/stipend-mcp/stipend/store"
)

const ledgerUsage = `Usage:
  stipend ledger collection [--collection-prefix P]
      print the ledger's Firestore collection (for the TTL policy)
  stipend ledger inspect REF [store flags]
      print the row named by REF (from a 409's "reference") as JSON
  stipend ledger resolve REF --update-time T (--delete | --complete-with FILE) [--retention D] [store flags]
      compare-and-set reconciliation: refused unless the row's update time is still T
      --delete             the write did not happen: delete the row, the next request runs
      --complete-with FILE the write happened: store FILE's answer, the next request replays it;
                           FILE is JSON {"status": 201, "header": {"Content-Type": ["application/json"]}, "body": <JSON>}
Store flags (defaults from STIPEND_* as for serve): --firestore-project, --firestore-database, --collection-prefix
`

// ledgerCmd runs `stipend ledger collection|inspect|resolve`: the operator's
// view of the idempotency ledger (docs/idempotency.md, Reconciliation).
func ledgerCmd(ctx context.Context, args []string, env map[string]string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, ledgerUsage)
		return 2
	}
	sub, rest := args[0], args[1:]
	f, err := parseLedgerFlags(sub, rest, env)
	if err != nil {
		fmt.Fprintf(stderr, "stipend ledger %s: %v\n\n%s", sub, err, ledgerUsage)
		return 2
	}
	switch sub {
	case "collection":
		fmt.Fprintln(stdout, idempotency.CollectionName(LedgerNamespace(f.cfg.CollectionPrefix)))
		return 0
	case "inspect", "resolve":
	default:
		fmt.Fprintf(stderr, "stipend ledger: unknown command %q\n\n%s", sub, ledgerUsage)
		return 2
	}
	ledger, closeLedger, err := openLedgerFor(ctx, f)
	if err != nil {
		fmt.Fprintf(stderr, "stipend ledger %s: %v\n", sub, err)
		return 1
	}
	defer closeLedger()
	if sub == "inspect" {
		err = inspectRow(ctx, ledger, f.ref, stdout)
	} else {
		err = resolveRow(ctx, ledger, f, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "stipend ledger %s: %v\n", sub, err)
		if errors.Is(err, store.ErrConflict) {
			fmt.Fprintln(stderr, "the row changed since it was inspected (or is not in progress): inspect it again before resolving")
		}
		return 1
	}
	return 0
}

// ledgerFlags is a parsed `stipend ledger` command line.
type ledgerFlags struct {
	cfg          Config
	ref          string
	updateTime   time.Time
	del          bool
	completeWith string
	retention    time.Duration
}

// parseLedgerFlags reads REF (before or after the flags) and the flags of
// sub. The Firestore settings come from serve's environment, but serve's
// production requirements (key files and so on) do not apply: an operator
// runs these with the service's settings during an incident.
func parseLedgerFlags(sub string, args []string, env map[string]string) (ledgerFlags, error) {
	base, err := readSettings(nil, env)
	if err != nil {
		return ledgerFlags{}, err
	}
	f := ledgerFlags{cfg: base}
	fs := flag.NewFlagSet("stipend ledger "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.cfg.FirestoreProject, "firestore-project", base.FirestoreProject, "")
	fs.StringVar(&f.cfg.FirestoreDatabase, "firestore-database", base.FirestoreDatabase, "")
	fs.StringVar(&f.cfg.CollectionPrefix, "collection-prefix", base.CollectionPrefix, "")
	updateTime := fs.String("update-time", "", "")
	fs.BoolVar(&f.del, "delete", false, "")
	fs.StringVar(&f.completeWith, "complete-with", "", "")
	fs.DurationVar(&f.retention, "retention", base.LedgerRetention, "") // the service's --ledger-retention
	var positional []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return ledgerFlags{}, err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch sub {
	case "collection":
		if len(positional) != 0 {
			return ledgerFlags{}, fmt.Errorf("unexpected argument %q", positional[0])
		}
		return f, nil
	case "inspect", "resolve":
		if len(positional) != 1 {
			return ledgerFlags{}, errors.New("want exactly one REF (firestore/<collection>/<hashed-id>)")
		}
		f.ref = positional[0]
	}
	if sub != "resolve" {
		return f, nil
	}
	if f.del == (f.completeWith != "") {
		return ledgerFlags{}, errors.New("give exactly one of --delete and --complete-with FILE")
	}
	if *updateTime == "" {
		return ledgerFlags{}, errors.New("--update-time is required (the updateTime that inspect printed)")
	}
	if f.updateTime, err = time.Parse(time.RFC3339Nano, *updateTime); err != nil {
		return ledgerFlags{}, fmt.Errorf("--update-time: %v", err)
	}
	if f.retention <= 0 {
		return ledgerFlags{}, errors.New("--retention must be positive")
	}
	return f, nil
}

// openLedgerFor opens the Firestore ledger holding f.ref's collection. The
// memory ledger lives inside the serving process and has nothing to inspect.
func openLedgerFor(ctx context.Context, f ledgerFlags) (idempotency.Ledger, func(), error) {
	backend, collection, _, err := idempotency.ParseReference(f.ref)
	if err != nil {
		return nil, nil, err
	}
	if backend != fsledger.Backend {
		return nil, nil, fmt.Errorf("reference %q: only firestore rows can be reconciled (the memory ledger lives and dies with its server)", f.ref)
	}
	client, err := openFirestore(ctx, f.cfg)
	if err != nil {
		return nil, nil, err
	}
	return fsledger.New(client, collection), func() { _ = client.Close() }, nil
}

// rowView is how inspect prints a row: every stored field except the
// response body, which is summarized.
type rowView struct {
	Reference   string            `json:"reference"`
	State       idempotency.State `json:"state"`
	Route       string            `json:"route"`
	Fingerprint string            `json:"fingerprint"`
	OperationID string            `json:"operationId,omitempty"`
	TraceID     string            `json:"traceId,omitempty"`
	// Fenced and WrittenAt: a fenced row without writtenAt never had its
	// change written, and heals itself (docs/idempotency.md).
	Fenced      bool          `json:"fenced"`
	WrittenAt   string        `json:"writtenAt,omitempty"`
	CreatedAt   string        `json:"createdAt"`
	CompletedAt string        `json:"completedAt,omitempty"`
	ExpireAt    string        `json:"expireAt,omitempty"`
	Expired     bool          `json:"expired,omitempty"`
	UpdateTime  string        `json:"updateTime"`
	Response    *responseView `json:"response,omitempty"`
}

type responseView struct {
	Status    int                 `json:"status"`
	Header    map[string][]string `json:"header,omitempty"`
	BodyBytes int                 `json:"bodyBytes"`
}

func inspectRow(ctx context.Context, l idempotency.Ledger, ref string, w io.Writer) error {
	r, err := l.Inspect(ctx, ref)
	if err != nil {
		return err
	}
	v := rowView{
		Reference: ref, State: r.State, Route: r.Route, Fingerprint: r.Fingerprint,
		OperationID: r.OperationID, TraceID: r.TraceID, Fenced: r.Fenced, WrittenAt: stamp(r.WrittenAt),
		CreatedAt: stamp(r.CreatedAt), CompletedAt: stamp(r.CompletedAt), ExpireAt: stamp(r.ExpireAt),
		Expired: r.Expired(time.Now()), UpdateTime: stamp(r.UpdateTime),
	}
	if r.Response != nil {
		v.Response = &responseView{Status: r.Response.Status, Header: r.Response.Header, BodyBytes: len(r.Response.Body)}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// responseFile is the --complete-with file: the answer the completed write
// gave, which later requests with the key replay.
type responseFile struct {
	Status int                 `json:"status"`
	Header map[string][]string `json:"header"`
	Body   json.RawMessage     `json:"body"`
}

func resolveRow(ctx context.Context, l idempotency.Ledger, f ledgerFlags, w io.Writer) error {
	if f.del {
		if err := l.ResolveDelete(ctx, f.ref, f.updateTime); err != nil {
			return err
		}
		fmt.Fprintf(w, "deleted %s: the next request with its key runs\n", f.ref)
		return nil
	}
	resp, err := readResponseFile(f.completeWith)
	if err != nil {
		return err
	}
	if err := l.ResolveComplete(ctx, f.ref, f.updateTime, resp, time.Now().Add(f.retention)); err != nil {
		return err
	}
	fmt.Fprintf(w, "completed %s with status %d: requests with its key replay it for %s\n", f.ref, resp.Status, f.retention)
	return nil
}

func readResponseFile(path string) (idempotency.Response, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return idempotency.Response{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var rf responseFile
	if err := dec.Decode(&rf); err != nil {
		return idempotency.Response{}, fmt.Errorf("%s: %v", path, err)
	}
	if rf.Status == 0 || len(rf.Body) == 0 {
		return idempotency.Response{}, fmt.Errorf("%s: status and body are required", path)
	}
	if rf.Header == nil {
		rf.Header = map[string][]string{"Content-Type": {"application/json"}}
	}
	var body bytes.Buffer
	if err := json.Compact(&body, rf.Body); err != nil {
		return idempotency.Response{}, fmt.Errorf("%s: body: %v", path, err)
	}
	return idempotency.Response{Status: rf.Status, Header: rf.Header, Body: body.Bytes()}, nil
}
