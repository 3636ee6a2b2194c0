package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// command is how one stipend command is called and what it does. The
// overview (`stipend help`), a command group's list (`stipend keys --help`)
// and the command's own usage (`stipend keys api --help`) print the same
// text, so they cannot disagree.
type command struct {
	name    string // as typed after "stipend", such as "keys api"
	args    string // its arguments and flags, as on its usage line
	summary string
}

// The commands, in the order of the overview.
var (
	cmdServe            = command{"[serve]", "[flags]", "run the service (the default command); its flags are below"}
	cmdKeysAPI          = command{"keys api", "--role ROLE [--agents a,b] [--id ID] [--json]", "make an API key: print the raw key (shown once) and its key file entry"}
	cmdKeysSigning      = command{"keys signing", "[--out FILE]", "make a receipt signing key file (mode 0600, never over an existing file)"}
	cmdReceiptVerify    = command{"receipt verify", "RECEIPT --jwks FILE|URL [--timeout D] [--json]", "verify a receipt offline against a JWKS"}
	cmdLedgerCollection = command{"ledger collection", "[--collection-prefix P]", "print the idempotency ledger's Firestore collection (for its TTL policy)"}
	cmdLedgerInspect    = command{"ledger inspect", "REF [store flags]", `print the ledger row REF names (a 409's "reference") as JSON`}
	cmdLedgerResolve    = command{"ledger resolve", "REF --update-time T (--delete | --complete-with FILE) [--retention D] [store flags]", "reconcile the row REF names, refused unless its update time is still T"}
	cmdStripeReconcile  = command{"stripe reconcile", "[--age D] [store, Stripe and signing flags]", "read the Stripe payments pending for longer than D from Stripe and apply their state, once (the service's sweep)"}
	cmdMigrate          = command{"migrate", "[--status] [--postgres-url URL] [--postgres-password-file FILE]", "apply the PostgreSQL store's and ledger's schema migrations (--status: list them, apply nothing)"}
	cmdVersion          = command{"version", "", "print the version (also: stipend --version)"}
	cmdHelp             = command{"help", "[COMMAND]", "print this help, or COMMAND's (also: --help or -h on any command)"}
)

// The command groups: each runs one of its subcommands.
var (
	keysCommands    = []command{cmdKeysAPI, cmdKeysSigning}
	receiptCommands = []command{cmdReceiptVerify}
	ledgerCommands  = []command{cmdLedgerCollection, cmdLedgerInspect, cmdLedgerResolve}
	stripeCommands  = []command{cmdStripeReconcile}
)

// commands is the overview, in its order.
var commands = concat([]command{cmdServe}, keysCommands, receiptCommands, ledgerCommands, stripeCommands, []command{cmdMigrate, cmdVersion, cmdHelp})

func concat(lists ...[]command) []command {
	var all []command
	for _, l := range lists {
		all = append(all, l...)
	}
	return all
}

// line is c's usage line, such as "stipend keys signing [--out FILE]".
func (c command) line() string { return strings.TrimSpace("stipend " + c.name + " " + c.args) }

// printCommands writes the usage line and summary of each of cmds to w.
func printCommands(w io.Writer, cmds []command) {
	for _, c := range cmds {
		fmt.Fprintf(w, "  %s\n        %s\n", c.line(), c.summary)
	}
}

// printCommandUsage writes c's usage line, summary and flags to w.
func printCommandUsage(w io.Writer, c command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s\n\n  %s\n", c.line(), c.summary)
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		fmt.Fprint(w, "\nFlags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}

// newFlagSet returns an empty flag set for c that prints nothing itself:
// parseCommand and usageError print its usage.
func newFlagSet(c command) *flag.FlagSet {
	fs := flag.NewFlagSet("stipend "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseCommand parses args into fs, with flags before or after the
// positional arguments (as in `verify RECEIPT --jwks FILE`), and returns the
// positional ones. When ok is false the command stops with exit code code:
// 0 after -h or --help, which print c's usage on stdout; 2 after a bad flag,
// which goes to stderr with the usage.
func parseCommand(c command, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (positional []string, code int, ok bool) {
	positional, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printCommandUsage(stdout, c, fs)
		return nil, 0, false
	}
	if err != nil {
		return nil, usageError(c, fs, stderr, err), false
	}
	return positional, 0, true
}

// parseFlagsOnly is parseCommand for a command that takes flags only: an
// error reading its environment (envErr, when there is one) and then any
// positional argument are usage errors too.
func parseFlagsOnly(c command, fs *flag.FlagSet, args []string, stdout, stderr io.Writer, envErr error) (code int, ok bool) {
	positional, code, ok := parseCommand(c, fs, args, stdout, stderr)
	switch {
	case !ok:
		return code, false
	case envErr != nil:
		return usageError(c, fs, stderr, envErr), false
	case len(positional) > 0:
		return usageError(c, fs, stderr, fmt.Errorf("unexpected argument %q", positional[0])), false
	}
	return 0, true
}

// usageError writes err and c's usage to stderr and returns 2, the exit code
// of a usage error.
func usageError(c command, fs *flag.FlagSet, stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "stipend %s: %v\n\n", c.name, err)
	printCommandUsage(stderr, c, fs)
	return 2
}

// parseInterspersed parses flags that may come before or after positional
// arguments, as in `verify RECEIPT --jwks FILE`.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		if args[0] == "--" {
			return append(positional, args[1:]...), nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// groupUsage answers a command group (keys, receipt, ledger) whose first
// argument names none of its commands: -h or --help prints the group's
// commands on stdout and returns 0; no argument or another one is a usage
// error (2).
func groupUsage(group string, cmds []command, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		printGroup(stdout, group, cmds)
		return 0
	}
	if len(args) == 0 {
		fmt.Fprintf(stderr, "stipend %s: want one of its commands\n\n", group)
	} else {
		fmt.Fprintf(stderr, "stipend %s: unknown command %q\n\n", group, args[0])
	}
	printGroup(stderr, group, cmds)
	return 2
}

func printGroup(w io.Writer, group string, cmds []command) {
	fmt.Fprintln(w, "Usage:")
	printCommands(w, cmds)
	fmt.Fprintf(w, "\nRun `stipend %s COMMAND --help` for a command's flags.\n", group)
}

// isHelp reports whether arg asks for help, as the flag package reads it.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "--h", "-help", "--help":
		return true
	}
	return false
}
