package api

// AppendConsumeAnswer exposes appendConsumeAnswer to the external tests.
var AppendConsumeAnswer = appendConsumeAnswer

// ConsumeAnswer is the answer type appendConsumeAnswer must encode like.
type ConsumeAnswer = consumeAnswer

// ConsumeBody and PaymentBody are request bodies, for the decode benchmark.
type (
	ConsumeBody = consumeBody
	PaymentBody = paymentBody
)
