package portal_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stipend-mcp/stipend/internal/nodetest"
	"github.com/stipend-mcp/stipend/portal"
)

// TestAssets_Fresh rebuilds the wallet (portal/web, npm run build) into a
// temporary directory and fails when the committed, embedded build in
// portal/dist differs: run `go generate ./portal` (or npm run build in
// portal/web) and commit portal/dist.
func TestAssets_Fresh(t *testing.T) {
	node, npm := nodetest.Tools(t)
	nodetest.CI(t, npm, "web")
	out := t.TempDir()
	cmd := exec.CommandContext(t.Context(), node, "build.mjs", out)
	cmd.Dir = "web"
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node build.mjs: %v\n%s", err, b)
	}
	built, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	embedded := portal.Assets()
	names, err := fs.Glob(embedded, "*")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != len(built) {
		t.Errorf("portal/dist holds %v, a fresh build %d files: run go generate ./portal and commit portal/dist", names, len(built))
	}
	for _, f := range built {
		want, err := os.ReadFile(filepath.Join(out, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := fs.ReadFile(embedded, f.Name())
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("portal/dist/%s is stale (or missing): run go generate ./portal and commit portal/dist", f.Name())
		}
	}
}

// TestAssets_NoThirdParty: the page and the app load nothing from another
// origin (no CDN): neither names an http(s) URL to fetch a script or style
// from.
func TestAssets_NoThirdParty(t *testing.T) {
	for _, name := range []string{"portal.html", "wallet.html"} {
		b, err := fs.ReadFile(portal.Assets(), name)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{`src="http`, `href="http`, `src="//`, `href="//`, "@import"} {
			if bytes.Contains(b, []byte(bad)) {
				t.Errorf("%s loads %s… from another origin", name, bad)
			}
		}
	}
}
