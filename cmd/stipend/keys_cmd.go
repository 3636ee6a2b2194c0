package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/stipend-mcp/stipend/apikey"
)

// keysAPICmd is `stipend keys api --role ROLE [--agents a,b] [--id ID]`: it
// prints a new raw API key (shown once, never stored) and the entry to add to
// the API key file.
func keysAPICmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("stipend keys api", flag.ContinueOnError)
	fs.SetOutput(stderr)
	role := fs.String("role", "", "host, billing, admin or reader (required)")
	agents := fs.String("agents", "", "reader keys: comma-separated agent IDs the key may read (required for reader)")
	id := fs.String("id", "", "key ID in the key file (default: ROLE-<random>)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: stipend keys api --role ROLE [--agents a,b] [--id ID]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "stipend keys api: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	if *role == "" {
		fmt.Fprintln(stderr, "stipend keys api: --role is required")
		fs.Usage()
		return 2
	}
	raw, key, err := apikey.Generate(*id, apikey.Role(*role), splitList(*agents))
	if err != nil {
		fmt.Fprintf(stderr, "stipend keys api: %v\n", err)
		return 2
	}
	entry, err := json.MarshalIndent(key, "", "  ")
	if err != nil {
		fmt.Fprintf(stderr, "stipend keys api: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, `API key (shown once; give it to the caller, store it as a secret):

  %s

Add this entry to the "keys" array of the API key file (it holds only the key's SHA-256):

%s
`, raw, entry)
	return 0
}
