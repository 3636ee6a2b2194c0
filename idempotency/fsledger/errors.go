package fsledger

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Backend errors become store errors in one place, internal/fsfault (the
// Firestore store uses it too): fsfault.Read for a call that wrote nothing,
// fsfault.Write for a write that was sent. The ledger branches itself only
// on the gRPC codes below.
const (
	codeNotFound           = codes.NotFound
	codeAlreadyExists      = codes.AlreadyExists
	codeFailedPrecondition = codes.FailedPrecondition
)

// code returns err's gRPC code (codes.OK for nil).
func code(err error) codes.Code {
	return status.Code(err)
}
