package apikey_test

import (
	"strings"
	"testing"

	"github.com/stipend-mcp/stipend/apikey"
)

// TestGenerate_DefaultIDRevealsNothing: the default key ID, which is
// logged, is not taken from the secret.
func TestGenerate_DefaultIDRevealsNothing(t *testing.T) {
	for range 20 {
		raw, k, err := apikey.Generate("", apikey.RoleHost, nil)
		if err != nil {
			t.Fatal(err)
		}
		secret := strings.TrimPrefix(raw, apikey.KeyPrefix+"host_")
		suffix := strings.TrimPrefix(k.ID, "host-")
		if strings.HasPrefix(secret, suffix) {
			t.Fatalf("key ID %q repeats the start of the secret %q", k.ID, secret[:8])
		}
	}
}

// TestNewSet_RefusesOneKeyTwice: one key listed under two IDs would take
// whichever role came last.
func TestNewSet_RefusesOneKeyTwice(t *testing.T) {
	_, k, err := apikey.Generate("host", apikey.RoleHost, nil)
	if err != nil {
		t.Fatal(err)
	}
	admin := k
	admin.ID, admin.Role = "admin", apikey.RoleAdmin
	admin.SHA256 = strings.ToUpper(admin.SHA256)
	if _, err := apikey.NewSet([]apikey.Key{k, admin}); err == nil || !strings.Contains(err.Error(), "keys[1].sha256") {
		t.Errorf("NewSet(one key twice) = %v, want an error naming keys[1].sha256", err)
	}
	if _, err := apikey.NewSet([]apikey.Key{k}); err != nil {
		t.Errorf("NewSet(one key) = %v", err)
	}
}
