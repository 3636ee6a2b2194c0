package receipt

import "errors"

// The reasons a receipt is refused. Verify and Sign wrap them with detail;
// classify with errors.Is.
var (
	// ErrInvalid reports a receipt whose content breaks the format: an amount
	// beyond money.MaxCents, a missing field, an unknown kind or version.
	ErrInvalid = errors.New("invalid receipt")
	// ErrMalformed reports a JWS, key file or JWKS that does not parse.
	ErrMalformed = errors.New("malformed")
	// ErrWrongAlgorithm reports a JWS or key whose algorithm is not EdDSA (Ed25519).
	ErrWrongAlgorithm = errors.New("wrong algorithm")
	// ErrWrongType reports a JWS whose typ header is not Type.
	ErrWrongType = errors.New("wrong type")
	// ErrUnknownKey reports a JWS whose kid is not in the JWKS.
	ErrUnknownKey = errors.New("unknown kid")
	// ErrBadSignature reports a signature that does not verify with the key its
	// kid names: the payload was changed or another key signed it.
	ErrBadSignature = errors.New("bad signature")
)
