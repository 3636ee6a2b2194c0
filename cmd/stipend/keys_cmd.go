package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/receipt"
)

// defaultSigningKeyFile is where `stipend keys signing` writes without --out.
const defaultSigningKeyFile = "stipend-signing-key.json"

// keysCmd dispatches `stipend keys api|signing`.
func keysCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "api":
			return keysAPICmd(args[1:], stdout, stderr)
		case "signing":
			return keysSigningCmd(args[1:], stdout, stderr)
		}
	}
	return groupUsage("keys", keysCommands, args, stdout, stderr)
}

// apiKeyJSON is what `stipend keys api --json` prints: the raw key and the
// entry to add to the API key file.
type apiKeyJSON struct {
	RawKey string     `json:"rawKey"`
	Entry  apikey.Key `json:"entry"`
}

// keysAPICmd is `stipend keys api --role ROLE [--agents a,b] [--id ID]
// [--json]`: it prints a new raw API key (shown once, never stored) and the
// entry to add to the API key file, as text or, with --json, as one JSON
// object for scripts.
func keysAPICmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(cmdKeysAPI)
	role := fs.String("role", "", "host, billing, admin or reader (required)")
	agents := fs.String("agents", "", "reader keys: comma-separated agent IDs the key may read (required for reader)")
	id := fs.String("id", "", "key ID in the key file (default: ROLE-<random>)")
	asJSON := fs.Bool("json", false, `print {"rawKey": …, "entry": {…}} as JSON instead of text`)
	if code, ok := parseFlagsOnly(cmdKeysAPI, fs, args, stdout, stderr, nil); !ok {
		return code
	}
	if *role == "" {
		return usageError(cmdKeysAPI, fs, stderr, errors.New("--role is required"))
	}
	raw, key, err := apikey.Generate(*id, apikey.Role(*role), splitList(*agents))
	if err != nil {
		return usageError(cmdKeysAPI, fs, stderr, err)
	}
	if *asJSON {
		return writeJSON(stdout, stderr, cmdKeysAPI, apiKeyJSON{RawKey: raw, Entry: key})
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

// writeJSON prints v as indented JSON for command c and returns its exit code.
func writeJSON(stdout, stderr io.Writer, c command, v any) int {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		fmt.Fprintf(stderr, "stipend %s: %v\n", c.name, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s\n", b)
	return 0
}

// keysSigningCmd is `stipend keys signing [--out FILE]`: it writes a new
// Ed25519 signing key file (a private OKP JWK, mode 0600, never over an
// existing file) and prints its kid. --out - writes the key to stdout and the
// kid to stderr, for piping into a secret manager.
func keysSigningCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(cmdKeysSigning)
	out := fs.String("out", defaultSigningKeyFile, "file to write the new key to (refuses to overwrite); - for stdout")
	if code, ok := parseFlagsOnly(cmdKeysSigning, fs, args, stdout, stderr, nil); !ok {
		return code
	}
	file, err := receipt.GenerateKey()
	if err != nil {
		fmt.Fprintf(stderr, "stipend keys signing: %v\n", err)
		return 1
	}
	k, err := receipt.LoadKeyring(file)
	if err != nil {
		fmt.Fprintf(stderr, "stipend keys signing: %v\n", err)
		return 1
	}
	if *out == "-" {
		if _, err := stdout.Write(file); err != nil {
			fmt.Fprintf(stderr, "stipend keys signing: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "kid %s\n", k.KeyID())
		return 0
	}
	if err := writeNewFile(*out, file); err != nil {
		fmt.Fprintf(stderr, "stipend keys signing: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, k.KeyID())
	fmt.Fprintf(stderr, "Wrote receipt signing key %s (kid %s, mode 0600). Keep it secret.\n"+
		"Rotate: serve with --signing-key-file %s first, then the older key files (they keep verifying).\n",
		*out, k.KeyID(), *out)
	return 0
}

// writeNewFile writes data to a file that must not exist yet, readable by its
// owner only.
func writeNewFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s exists; not overwriting a key file (choose another --out)", path)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}
