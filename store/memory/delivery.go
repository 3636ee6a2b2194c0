package memory

// deliveryState is the webhook delivery state of a Store (see the webhooks work).
type deliveryState struct{}
