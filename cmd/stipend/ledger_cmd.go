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
	"github.com/stipend-mcp/stipend/idempotency/pgledger"
	"github.com/stipend-mcp/stipend/store"
)

// ledgerCmd runs `stipend ledger collection|inspect|resolve`: the operator's
// view of the idempotency ledger (docs/idempotency.md, Reconciliation).
func ledgerCmd(ctx context.Context, args []string, env map[string]string, stdout, stderr io.Writer) int {
	var c command
	if len(args) > 0 {
		for _, lc := range ledgerCommands {
			if lc.name == "ledger "+args[0] {
				c = lc
			}
		}
	}
	if c.name == "" {
		return groupUsage("ledger", ledgerCommands, args, stdout, stderr)
	}
	f, code, ok := parseLedgerFlags(c, args[1:], env, stdout, stderr)
	if !ok {
		return code
	}
	if c == cmdLedgerCollection {
		fmt.Fprintln(stdout, idempotency.CollectionName(LedgerNamespace(f.cfg.CollectionPrefix)))
		return 0
	}
	ledger, closeLedger, err := openLedgerFor(ctx, f)
	if err != nil {
		fmt.Fprintf(stderr, "stipend %s: %v\n", c.name, err)
		return 1
	}
	defer closeLedger()
	if c == cmdLedgerInspect {
		err = inspectRow(ctx, ledger, f.ref, stdout)
	} else {
		err = resolveRow(ctx, ledger, f, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "stipend %s: %v\n", c.name, err)
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
// the ledger command c; when ok is false, the command stops with code. The
// store settings default to serve's environment, but serve's production
// requirements (key files and so on) do not apply: an operator runs these
// with the service's settings during an incident.
func parseLedgerFlags(c command, args []string, env map[string]string, stdout, stderr io.Writer) (f ledgerFlags, code int, ok bool) {
	base, _, envErr := readSettings(nil, env)
	f.cfg = base
	fs := newFlagSet(c)
	storeFlag := func(p *string, name string) {
		s := settingNamed(name)
		fs.StringVar(p, name, *p, s.help+" ("+s.env+")")
	}
	var updateTime string
	if c == cmdLedgerCollection {
		storeFlag(&f.cfg.CollectionPrefix, "collection-prefix")
	} else { // REF names the collection; these name the database
		storeFlag(&f.cfg.FirestoreProject, "firestore-project")
		storeFlag(&f.cfg.FirestoreDatabase, "firestore-database")
		storeFlag(&f.cfg.PostgresURL, "postgres-url")
		storeFlag(&f.cfg.PostgresPasswordFile, "postgres-password-file")
	}
	if c == cmdLedgerResolve {
		fs.StringVar(&updateTime, "update-time", "", "the row's updateTime as inspect printed it (required): the resolve is refused if the row changed since")
		fs.BoolVar(&f.del, "delete", false, "the write did not happen: delete the row, and the next request with its key runs")
		fs.StringVar(&f.completeWith, "complete-with", "", "the write happened: store FILE's answer, which the next requests with its key replay;\n"+
			`FILE is JSON {"status": 201, "header": {"Content-Type": ["application/json"]}, "body": <JSON>}`)
		fs.DurationVar(&f.retention, "retention", base.LedgerRetention, "how long the completed answer replays (STIPEND_LEDGER_RETENTION, as the service's --ledger-retention)")
	}
	positional, code, ok := parseCommand(c, fs, args, stdout, stderr)
	if !ok {
		return ledgerFlags{}, code, false
	}
	if err := checkLedgerFlags(c, fs, env, &f, positional, updateTime, envErr); err != nil {
		return ledgerFlags{}, usageError(c, fs, stderr, err), false
	}
	return f, 0, true
}

// checkLedgerFlags checks a parsed ledger command line and sets f.ref and
// f.updateTime.
func checkLedgerFlags(c command, fs *flag.FlagSet, env map[string]string, f *ledgerFlags, positional []string, updateTime string, envErr error) error {
	switch {
	case envErr != nil:
		return envErr
	case c == cmdLedgerCollection && len(positional) != 0:
		return fmt.Errorf("unexpected argument %q", positional[0])
	case c == cmdLedgerCollection:
		return nil
	case len(positional) != 1:
		return errors.New("want exactly one REF (firestore/<collection>/<hashed-id> or postgres/<collection>/<hashed-id>)")
	}
	f.ref = positional[0]
	if c != cmdLedgerResolve {
		return nil
	}
	if f.del == (f.completeWith != "") {
		return errors.New("give exactly one of --delete and --complete-with FILE")
	}
	if updateTime == "" {
		return errors.New("--update-time is required (the updateTime that inspect printed)")
	}
	var err error
	if f.updateTime, err = time.Parse(time.RFC3339Nano, updateTime); err != nil {
		return fmt.Errorf("--update-time: %v", err)
	}
	if f.retention <= 0 {
		// The default comes from the service's variable: name it when it
		// gave the value.
		if v, set := env["STIPEND_LEDGER_RETENTION"]; set && !flagSet(fs, "retention") {
			return fmt.Errorf("STIPEND_LEDGER_RETENTION=%q: must be positive (it is the default of --retention)", v)
		}
		return errors.New("--retention: must be positive")
	}
	return nil
}

// openLedgerFor opens the ledger holding f.ref's collection: on Firestore
// or on PostgreSQL, as the reference says. The memory ledger lives inside
// the serving process and has nothing to inspect.
func openLedgerFor(ctx context.Context, f ledgerFlags) (idempotency.Ledger, func(), error) {
	backend, collection, _, err := idempotency.ParseReference(f.ref)
	if err != nil {
		return nil, nil, err
	}
	switch backend {
	case fsledger.Backend:
		client, err := openFirestore(ctx, f.cfg)
		if err != nil {
			return nil, nil, err
		}
		return fsledger.New(client, collection), func() { _ = client.Close() }, nil
	case pgledger.Backend:
		if f.cfg.PostgresURL == "" {
			return nil, nil, errors.New("a postgres reference needs --postgres-url (or STIPEND_POSTGRES_URL)")
		}
		c := f.cfg
		c.PostgresMaxConns = 2
		pool, err := openPostgres(ctx, c)
		if err != nil {
			return nil, nil, err
		}
		return pgledger.New(pool, collection), pool.Close, nil
	}
	return nil, nil, fmt.Errorf("reference %q: only firestore and postgres rows can be reconciled (the memory ledger lives and dies with its server)", f.ref)
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
