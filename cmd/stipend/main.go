// Command stipend is the Stipend service and its operator tools: serve (the
// default), keys, receipt verify, ledger, stripe reconcile, migrate and version. Run `stipend help` for
// every command, flag and STIPEND_* environment variable, and `stipend
// COMMAND --help` for one command's flags.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
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
	switch {
	case len(args) == 0:
	case args[0] == "--version" || args[0] == "-version":
		cmd, rest = "version", args[1:]
	case !strings.HasPrefix(args[0], "-"):
		cmd, rest = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		if asksVersion(rest) {
			return versionCmd(nil, stdout, stderr) // `stipend serve --version`, as `stipend --version`
		}
		return serveCmd(ctx, rest, env, stdout, stderr)
	case "keys":
		return keysCmd(rest, stdout, stderr)
	case "receipt":
		if len(rest) > 0 && rest[0] == "verify" {
			return receiptVerifyCmd(ctx, rest[1:], stdout, stderr)
		}
		return groupUsage("receipt", receiptCommands, rest, stdout, stderr)
	case "ledger":
		return ledgerCmd(ctx, rest, env, stdout, stderr)
	case "stripe":
		return stripeCmd(ctx, rest, env, stdout, stderr)
	case "migrate":
		return migrateCmd(ctx, rest, env, stdout, stderr)
	case "version":
		return versionCmd(rest, stdout, stderr)
	case "help":
		if len(rest) > 0 && !isHelp(rest[0]) {
			// `stipend help keys api` is `stipend keys api --help`.
			return RunCommand(ctx, append(slices.Clip(rest), "--help"), env, stdout, stderr)
		}
		printUsage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "stipend: unknown command %q\n\n", cmd)
		printUsage(stderr)
		return 2
	}
}

// asksVersion reports whether serve's flags ask for the version
// (--version or -version before any "--").
func asksVersion(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--version", "-version":
			return true
		}
	}
	return false
}

// versionCmd is `stipend version` (and `stipend --version`).
func versionCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(cmdVersion)
	if code, ok := parseFlagsOnly(cmdVersion, fs, args, stdout, stderr, nil); !ok {
		return code
	}
	fmt.Fprintln(stdout, "stipend", version())
	return 0
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
	fmt.Fprintln(w, "Usage:")
	printCommands(w, commands)
	fmt.Fprint(w, "\nServe flags (each also read from its environment variable; a flag wins):\n")
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
