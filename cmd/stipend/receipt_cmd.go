package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/gowebpki/jcs"
	"golang.org/x/text/currency"

	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/receipt"
)

// maxReceiptFile bounds what `receipt verify` reads from a receipt file or a
// JWKS (file or URL).
const maxReceiptFile = 1 << 20

// receiptVerifyCmd is `stipend receipt verify RECEIPT --jwks FILE|URL`.
// RECEIPT is a file holding a compact JWS, or the receipt JSON the API returns
// (with its "jws" member, alone or under "receipt"); in the latter case every
// receipt field in the file must also match the signed payload. It exits 0
// and prints a summary for a valid receipt, 1 with the reason for an invalid
// one (tampered field, unknown kid, wrong key…), 2 on a usage error.
func receiptVerifyCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(cmdReceiptVerify)
	jwksSource := fs.String("jwks", "", "JWKS file, or http(s) URL such as https://HOST/.well-known/jwks.json (required)")
	timeout := fs.Duration("timeout", 10*time.Second, "time limit for fetching a JWKS URL")
	asJSON := fs.Bool("json", false, "print the verified receipt as JSON instead of a summary")
	positional, code, ok := parseCommand(cmdReceiptVerify, fs, args, stdout, stderr)
	switch {
	case !ok:
		return code
	case len(positional) != 1:
		return usageError(cmdReceiptVerify, fs, stderr, fmt.Errorf("want one RECEIPT file, got %d arguments", len(positional)))
	case *jwksSource == "":
		return usageError(cmdReceiptVerify, fs, stderr, errors.New("--jwks is required"))
	}

	set, err := loadJWKS(ctx, *jwksSource, *timeout)
	if err != nil {
		fmt.Fprintf(stderr, "stipend receipt verify: JWKS %s: %v\n", *jwksSource, err)
		return 1
	}
	data, err := readLimited(positional[0])
	if err != nil {
		fmt.Fprintf(stderr, "stipend receipt verify: %v\n", err)
		return 1
	}
	r, kid, err := verifyReceiptFile(data, set)
	if err != nil {
		fmt.Fprintf(stderr, "INVALID receipt %s: %v\n", positional[0], err)
		return 1
	}
	if *asJSON {
		return writeJSON(stdout, stderr, cmdReceiptVerify, r)
	}
	printReceiptSummary(stdout, r, kid)
	return 0
}

// verifyReceiptFile verifies a compact JWS or an API receipt object and
// returns the signed receipt and the kid that signed it.
func verifyReceiptFile(data []byte, set receipt.JWKS) (receipt.Receipt, string, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return receipt.Receipt{}, "", errors.New("the file is empty")
	}
	var object map[string]json.RawMessage
	jws := string(data)
	if data[0] == '{' {
		var err error
		if object, jws, err = receiptObject(data); err != nil {
			return receipt.Receipt{}, "", err
		}
	}
	r, err := receipt.Verify(jws, set)
	if err != nil {
		return receipt.Receipt{}, "", err
	}
	if object != nil {
		if err := matchSigned(object, r); err != nil {
			return receipt.Receipt{}, "", err
		}
	}
	h, err := receipt.ParseHeader(jws)
	if err != nil {
		return receipt.Receipt{}, "", err
	}
	return r, h.KeyID, nil
}

// receiptObject finds the receipt object (top level, or under "receipt" as in
// the payment succeed answer) and its "jws" member.
func receiptObject(data []byte) (map[string]json.RawMessage, string, error) {
	var object map[string]json.RawMessage
	if err := json.Unmarshal(data, &object); err != nil {
		return nil, "", fmt.Errorf("the file is not a receipt JSON object: %w", err)
	}
	if _, ok := object["jws"]; !ok {
		if inner, ok := object["receipt"]; ok {
			object = nil
			if err := json.Unmarshal(inner, &object); err != nil {
				return nil, "", fmt.Errorf(`"receipt" is not a receipt object: %w`, err)
			}
		}
	}
	var jws string
	if err := json.Unmarshal(object["jws"], &jws); err != nil || jws == "" {
		return nil, "", errors.New(`the receipt object has no "jws" string member (the compact JWS the API returns)`)
	}
	delete(object, "jws")
	return object, jws, nil
}

// matchSigned checks that every member of a receipt object that the signed
// payload also has is equal to it (compared as RFC 8785 canonical JSON), so a
// field changed beside an intact JWS is caught. Members the payload lacks are
// not signed and make the receipt invalid too: nothing unsigned may pose as
// part of it.
func matchSigned(object map[string]json.RawMessage, r receipt.Receipt) error {
	canon, err := receipt.Canonical(r)
	if err != nil {
		return err
	}
	var signed map[string]json.RawMessage
	if err := json.Unmarshal(canon, &signed); err != nil {
		return err
	}
	names := make([]string, 0, len(object))
	for name := range object {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		want, ok := signed[name]
		if !ok {
			return fmt.Errorf("field %q is not in the signed receipt", name)
		}
		value := object[name]
		if name == "grants" && string(bytes.TrimSpace(value)) == "null" {
			value = json.RawMessage("[]") // a receipt without grants is signed with "grants":[]
		}
		got, err := jcs.Transform(value)
		if err != nil {
			return fmt.Errorf("field %q: %w", name, err)
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("field %q does not match the signed receipt: the file says %s, the signature covers %s", name, got, want)
		}
	}
	return nil
}

// loadJWKS reads a JWKS from a file or an http(s) URL.
func loadJWKS(ctx context.Context, source string, timeout time.Duration) (receipt.JWKS, error) {
	if !strings.Contains(source, "://") {
		data, err := readLimited(source)
		if err != nil {
			return receipt.JWKS{}, err
		}
		return receipt.ParseJWKS(data)
	}
	u, err := url.Parse(source)
	if err != nil {
		return receipt.JWKS{}, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return receipt.JWKS{}, fmt.Errorf("only http and https URLs are fetched, not %s", u.Scheme)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return receipt.JWKS{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return receipt.JWKS{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return receipt.JWKS{}, fmt.Errorf("GET answered %s", resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReceiptFile+1))
	if err != nil {
		return receipt.JWKS{}, err
	}
	if len(data) > maxReceiptFile {
		return receipt.JWKS{}, fmt.Errorf("larger than %d bytes", maxReceiptFile)
	}
	return receipt.ParseJWKS(data)
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxReceiptFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxReceiptFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxReceiptFile)
	}
	return data, nil
}

func printReceiptSummary(w io.Writer, r receipt.Receipt, kid string) {
	fmt.Fprintf(w, "VALID receipt %s\n", r.ID)
	fmt.Fprintf(w, "  kind:      %s (version %d)\n", r.Kind, r.Version)
	fmt.Fprintf(w, "  issuer:    %s\n", r.Issuer)
	fmt.Fprintf(w, "  agent:     %s\n", r.AgentID)
	fmt.Fprintf(w, "  payment:   %s\n", r.PaymentID)
	fmt.Fprintf(w, "  amount:    %s\n", moneyText(r.Amount))
	fmt.Fprintf(w, "  issued at: %s\n", r.IssuedAt.UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(w, "  signed by: kid %s\n", kid)
	for _, g := range r.Grants {
		fmt.Fprintf(w, "  grant:     %s %s on %s%s\n", g.Type, g.EntitlementID, scopeText(g), grantDetail(g))
	}
}

// moneyText shows m as a person reads it, in the currency's major unit
// ("3.00 USD"), with the minor units the receipt holds beside it. A
// currency without a known scale shows minor units only.
func moneyText(m money.Money) string {
	u, err := currency.ParseISO(m.Currency)
	if err != nil {
		return fmt.Sprintf("%d %s (minor units)", m.Cents, m.Currency)
	}
	scale, _ := currency.Standard.Rounding(u)
	if scale == 0 {
		return fmt.Sprintf("%d %s", m.Cents, m.Currency)
	}
	sign, c := "", m.Cents
	if c < 0 {
		sign, c = "-", -c
	}
	div := int64(1)
	for range scale {
		div *= 10
	}
	return fmt.Sprintf("%s%d.%0*d %s (%d minor units)", sign, c/div, scale, c%div, m.Currency, m.Cents)
}

func scopeText(g receipt.Grant) string {
	if len(g.Scope.Tools) == 0 {
		return g.Scope.Service
	}
	return g.Scope.Service + " (" + strings.Join(g.Scope.Tools, ", ") + ")"
}

func grantDetail(g receipt.Grant) string {
	var parts []string
	if !g.Balance.IsZero() {
		parts = append(parts, "balance "+moneyText(g.Balance))
	}
	if g.Limit != 0 {
		parts = append(parts, fmt.Sprintf("%d per %s", g.Limit, g.Period))
	}
	if g.ValidUntil != nil {
		parts = append(parts, "valid until "+g.ValidUntil.UTC().Format(time.RFC3339))
	}
	if g.ExpiresAt != nil {
		parts = append(parts, "expires "+g.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, ", ")
}
