package webhook_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/webhook"
)

// TestDocs_EventData: docs/webhooks.md says, for every event type, which
// object its data holds (one table row per type).
func TestDocs_EventData(t *testing.T) {
	doc, err := os.ReadFile("../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range event.Types {
		row := "| `" + string(typ) + "` |"
		i := strings.Index(string(doc), row)
		if i < 0 {
			t.Errorf("docs/webhooks.md has no row %q saying what its data holds", row)
			continue
		}
		line, _, _ := strings.Cut(string(doc[i:]), "\n")
		if !strings.Contains(line, "**") {
			t.Errorf("docs/webhooks.md row of %s names no object (in bold): %s", typ, line)
		}
	}
}

// TestDocs_StripeEventsSubscribed: the Stripe endpoint the Cloud Run guide
// creates subscribes to every event type Stipend reads, and stripe.md
// lists each one.
func TestDocs_StripeEventsSubscribed(t *testing.T) {
	deploy, err := os.ReadFile("../docs/deploy-cloud-run.md")
	if err != nil {
		t.Fatal(err)
	}
	stripeDoc, err := os.ReadFile("../docs/stripe.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{webhook.StripePaymentSucceeded, webhook.StripePaymentFailed, webhook.StripePaymentCanceled,
		webhook.StripeChargeRefunded, webhook.StripeDisputeCreated, webhook.StripeDisputeClosed, webhook.StripeCheckoutCompleted,
		webhook.StripeCheckoutAsyncSucceeded, webhook.StripeCheckoutAsyncFailed, webhook.StripeCheckoutExpired} {
		if !strings.Contains(string(deploy), `"enabled_events[]=`+typ+`"`) {
			t.Errorf("docs/deploy-cloud-run.md does not subscribe the Stripe endpoint to %s", typ)
		}
		if !strings.Contains(string(stripeDoc), "| `"+typ+"` |") {
			t.Errorf("docs/stripe.md has no row for %s", typ)
		}
	}
}
