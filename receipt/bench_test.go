package receipt_test

import (
	"testing"

	"github.com/stipend-mcp/stipend/receipt"
)

func BenchmarkCanonical(b *testing.B) {
	r := sampleReceipt(b)
	for b.Loop() {
		if _, err := receipt.Canonical(r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSign(b *testing.B) {
	k := newKeyring(b)
	r := sampleReceipt(b)
	for b.Loop() {
		if _, err := k.Sign(r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	k := newKeyring(b, generateKey(b), generateKey(b), generateKey(b))
	jws, err := k.Sign(sampleReceipt(b))
	if err != nil {
		b.Fatal(err)
	}
	set := k.JWKS()
	for b.Loop() {
		if _, err := receipt.Verify(jws, set); err != nil {
			b.Fatal(err)
		}
	}
}
