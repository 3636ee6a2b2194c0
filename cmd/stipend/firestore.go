package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// emulatorProject is the project of an emulator client when none is
// configured: the client library's own placeholder for the emulator.
const emulatorProject = "dummy-emulator-firestore-project"

// openFirestore opens a Firestore client on c's project and database. It is
// the one way stipend opens Firestore: serve opens one client for its store
// and ledger, and `stipend ledger` one for the rows it reconciles.
//
// With c.FirestoreEmulatorHost (FIRESTORE_EMULATOR_HOST in the environment
// the command was given) the client talks to that emulator, without
// credentials; otherwise to Firestore, with Application Default Credentials.
func openFirestore(ctx context.Context, c Config) (*firestore.Client, error) {
	project := c.FirestoreProject
	var opts []option.ClientOption
	// The client library dials the emulator itself whenever the process
	// environment names one, and a connection passed in then replaces its
	// own without closing it. So when the process environment already
	// names the configured emulator, the library's connection is the one
	// used (and Client.Close closes it); only a configuration that differs
	// from the process environment gets a connection of its own.
	if host, ok := os.LookupEnv("FIRESTORE_EMULATOR_HOST"); c.FirestoreEmulatorHost != "" && (!ok || host != c.FirestoreEmulatorHost) {
		conn, err := dialEmulator(c.FirestoreEmulatorHost)
		if err != nil {
			return nil, fmt.Errorf("firestore emulator %q: %w", c.FirestoreEmulatorHost, err)
		}
		// The client owns conn from here: Client.Close closes it.
		opts = append(opts, option.WithGRPCConn(conn))
	}
	if c.FirestoreEmulatorHost != "" && project == "" {
		project = emulatorProject
	}
	if project == "" {
		project = firestore.DetectProjectID
	}
	client, err := firestore.NewClientWithDatabase(ctx, project, c.FirestoreDatabase, opts...)
	if err != nil {
		return nil, fmt.Errorf("firestore client (project %q, database %q): %w", c.FirestoreProject, c.FirestoreDatabase, err)
	}
	return client, nil
}

// dialEmulator returns a connection to the Firestore emulator at host, made
// the way the client library makes it when it reads FIRESTORE_EMULATOR_HOST
// from the process environment itself (cloud.google.com/go/firestore,
// newClient): plaintext, messages of any size, and the emulator's owner
// token, so Security Rules do not apply, as they do not to the service
// account in production. Stipend passes the connection explicitly so that the
// environment the command was given is the one source of the setting.
func dialEmulator(host string) (*grpc.ClientConn, error) {
	target := host
	if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") || !strings.Contains(target, "://") {
		target = "passthrough:///" + strings.TrimPrefix(strings.TrimPrefix(target, "http://"), "https://")
	}
	return grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(emulatorOwner{}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.MaxCallSendMsgSize(math.MaxInt32)),
	)
}

// emulatorOwner authorizes every call as the emulator's administrator
// ("Bearer owner", which the emulator accepts in place of credentials).
type emulatorOwner struct{}

func (emulatorOwner) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer owner"}, nil
}

func (emulatorOwner) RequireTransportSecurity() bool { return false }
