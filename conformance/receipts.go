package conformance

import (
	"fmt"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
)

func testReceiptsList(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	agent := newAgent()
	var want []receipt.Signed
	for i := range 3 {
		p := createPayment(t, s, newPayment(agent, fmt.Sprint("k", i), int64(100*(i+1))))
		want = append(want, completePayment(t, s, p.ID).Receipt)
		clock.Advance(time.Second)
	}
	other := createPayment(t, s, newPayment(newAgent(), "other", 100))
	completePayment(t, s, other.ID)
	got, _ := allPages(t, "ListReceipts", 2, 10, func(p store.Page) ([]receipt.Signed, string, error) {
		return s.ListReceipts(ctx, agent, p)
	})
	if d := cmpDiff(want, got); d != "" {
		t.Errorf("ListReceipts over pages of 2 (-want +got):\n%s", d)
	}
	_, _, err := s.ListReceipts(ctx, agent, store.Page{Cursor: "~~~"})
	wantCode(t, "ListReceipts(bad cursor)", err, store.CodeInvalid)
	_, err = s.GetReceipt(ctx, "no-such-receipt")
	wantCode(t, "GetReceipt(unknown)", err, store.CodeNotFound)
}
