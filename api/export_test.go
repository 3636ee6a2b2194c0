package api

import (
	"context"
	"time"
)

// AppendConsumeAnswer exposes appendConsumeAnswer to the external tests.
var AppendConsumeAnswer = appendConsumeAnswer

// ConsumeAnswer is the answer type appendConsumeAnswer must encode like.
type ConsumeAnswer = consumeAnswer

// ConsumeBody and PaymentBody are request bodies, for the decode benchmark.
type (
	ConsumeBody = consumeBody
	PaymentBody = paymentBody
)

// StoreContext returns the store deadline's context that requestScope
// gives a request whose context is parent, ending at deadline, and the
// function it calls when the request is done.
func StoreContext(parent context.Context, deadline time.Time) (context.Context, func()) {
	d := &deadlineCtx{Context: parent, deadline: deadline}
	return d, d.release
}
