// Command stipend is the Stipend service and its operator tools:
//
//	stipend [serve] [flags]            run the service (the default)
//	stipend keys api --role ROLE       make an API key and its key file entry
//	stipend keys signing --out FILE    make a receipt signing key file
//	stipend receipt verify FILE --jwks FILE|URL
//	stipend ledger inspect|resolve REF  reconcile the idempotency ledger
//	stipend migrate [--status]         apply the PostgreSQL schema migrations
//	stipend version
//
// Run `stipend help` for every flag and its STIPEND_* environment variable.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	go func() {
		// After the first signal starts the graceful shutdown, a second one
		// ends the process at once (Go's default for SIGTERM and SIGINT).
		<-ctx.Done()
		stop()
	}()
	code := RunCommand(ctx, os.Args[1:], Environ(os.Environ()), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// RunCommand runs the stipend command line with args (without the program name) and
// env, and returns the exit code: 0 on success, 2 on a usage error, 1 on any
// other failure. Serve runs until ctx is done (main cancels it on SIGTERM or
// SIGINT), then drains in-flight requests and returns 0.
func RunCommand(ctx context.Context, args []string, env map[string]string, stdout, stderr io.Writer) int {
	cmd, rest := "serve", args
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, rest = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serveCmd(ctx, rest, env, stdout, stderr)
	case "keys":
		return keysCmd(rest, stdout, stderr)
	case "receipt":
		if len(rest) > 0 && rest[0] == "verify" {
			return receiptVerifyCmd(ctx, rest[1:], stdout, stderr)
		}
		fmt.Fprintln(stderr, "stipend receipt: want `stipend receipt verify RECEIPT --jwks FILE|URL`")
		return 2
	case "ledger":
		return ledgerCmd(ctx, rest, env, stdout, stderr)
	case "migrate":
		return migrateCmd(ctx, rest, env, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "stipend", version())
		return 0
	case "help":
		printUsage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "stipend: unknown command %q\n\n", cmd)
		printUsage(stderr)
		return 2
	}
}

// Environ turns os.Environ-style "K=V" pairs into a map.
func Environ(pairs []string) map[string]string {
	env := make(map[string]string, len(pairs))
	for _, kv := range pairs {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

// printUsage writes the command overview and every serve setting to w.
func printUsage(w io.Writer) {
	fmt.Fprint(w, `Usage:
  stipend [serve] [flags]                     run the service (default)
  stipend keys api --role ROLE [--agents a,b] [--id ID]
                                              make an API key; prints the raw key once and its key file entry
  stipend keys signing --out FILE             make a receipt signing key file
  stipend receipt verify RECEIPT --jwks FILE|URL
                                              verify a receipt offline
  stipend ledger collection|inspect REF|resolve REF ...
                                              reconcile the idempotency ledger (stipend ledger for help)
  stipend migrate [--status]                  apply (or list) the PostgreSQL schema migrations
  stipend version                             print the version
  stipend help                                print this help

Serve flags (each also read from its environment variable; a flag wins):
`)
	for _, s := range settings {
		def := ""
		if s.def != "" {
			def = "default " + s.def
		}
		line := fmt.Sprintf("  --%-23s %-31s %s", s.flag, s.env, def)
		fmt.Fprintf(w, "%s\n        %s\n", strings.TrimRight(line, " "), s.help)
	}
	fmt.Fprint(w, "\nSee docs/configuration.md for every setting in detail.\n")
}
