package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/stipend-mcp/stipend/apikey"
)

// DevAgent is the agent the development reader key may read.
const DevAgent = "agent-demo"

// DevKeys are the raw API keys development mode makes, one per role; the
// file --dev-keys-out writes has this shape.
type DevKeys struct {
	Host         string   `json:"host"`
	Billing      string   `json:"billing"`
	Admin        string   `json:"admin"`
	Reader       string   `json:"reader"`
	ReaderAgents []string `json:"readerAgents"`
}

// NewDevKeys makes one key per role (the reader's limited to DevAgent) and
// the key set that accepts them.
func NewDevKeys() (*DevKeys, *apikey.Set, error) {
	d := &DevKeys{ReaderAgents: []string{DevAgent}}
	var entries []apikey.Key
	for _, r := range []struct {
		role apikey.Role
		raw  *string
	}{
		{apikey.RoleHost, &d.Host},
		{apikey.RoleBilling, &d.Billing},
		{apikey.RoleAdmin, &d.Admin},
		{apikey.RoleReader, &d.Reader},
	} {
		var agents []string
		if r.role == apikey.RoleReader {
			agents = d.ReaderAgents
		}
		raw, k, err := apikey.Generate("dev-"+string(r.role), r.role, agents)
		if err != nil {
			return nil, nil, err
		}
		*r.raw = raw
		entries = append(entries, k)
	}
	set, err := apikey.NewSet(entries)
	if err != nil {
		return nil, nil, err
	}
	return d, set, nil
}

// WriteFile writes the keys to path as JSON, readable only by the owner
// (0600, also when the file already existed).
func (d *DevKeys) WriteFile(path string) error {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// printBanner tells a developer, on stdout, what development mode means and
// how to call the service.
func (m *Main) printBanner(signingKID string) {
	c := m.Config
	w := m.Stdout
	fmt.Fprintf(w, "\nStipend is running in DEVELOPMENT mode at %s\n\n", m.URL())
	if c.Store == StoreMemory {
		fmt.Fprintln(w, "  NOTHING IS DURABLE: the memory store loses every account, entitlement, payment and")
		fmt.Fprintln(w, "  receipt when this process stops, and is not shared between instances.")
	}
	if m.DevKeys != nil {
		fmt.Fprintln(w, "  The API keys below are EPHEMERAL: new ones are made at every start.")
		fmt.Fprintf(w, "\n    host     %s\n", m.DevKeys.Host)
		fmt.Fprintf(w, "    billing  %s\n", m.DevKeys.Billing)
		fmt.Fprintf(w, "    admin    %s\n", m.DevKeys.Admin)
		fmt.Fprintf(w, "    reader   %s   (may read agent %q only)\n\n", m.DevKeys.Reader, DevAgent)
		if c.DevKeysOut != "" {
			fmt.Fprintf(w, "  Written to %s (JSON, mode 0600).\n", c.DevKeysOut)
		}
	}
	if len(c.SigningKeyFiles) == 0 {
		fmt.Fprintf(w, "  The receipt signing key (kid %s) is EPHEMERAL: receipts signed now cannot be verified\n", signingKID)
		fmt.Fprintln(w, "  after a restart unless you saved the JWKS from /.well-known/jwks.json.")
	}
	fmt.Fprintf(w, "\n  Try: curl -s %s/healthz\n", m.URL())
	fmt.Fprintln(w, "  Production: --env production --store firestore --api-keys-file FILE --signing-key-file FILE")
	fmt.Fprintln(w)
}
