package main_test

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDockerfile_BuildStep runs the Dockerfile's go build step (there is no
// Docker engine in the tests) and checks what the image relies on: a static
// binary, which the distroless base (no libc) can run, stamped with the
// VERSION build argument.
func TestDockerfile_BuildStep(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	b := repoFile(t, "Dockerfile")
	var build string
	for line := range strings.Lines(string(b)) {
		if cmd, ok := strings.CutPrefix(strings.TrimSpace(line), "RUN "); ok && strings.Contains(cmd, "go build") {
			build = cmd
		}
	}
	const out = "-o /out/stipend "
	if !strings.Contains(build, out) {
		t.Fatalf("the Dockerfile has no RUN … go build %s… step (the runtime stage copies /out/stipend)", out)
	}
	bin := filepath.Join(t.TempDir(), "stipend")
	cmd := exec.Command("sh", "-c", strings.Replace(build, out, "-o "+bin+" ", 1))
	cmd.Dir = "../.."
	const version = "v0.0.0-dockerfile-test"
	cmd.Env = append(os.Environ(), "VERSION="+version)
	if got, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build, err, got)
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the Dockerfile's binary is dynamically linked (%v): it cannot run on a base without libc", p.Type)
		}
	}
	got, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "stipend " + version + "\n"; string(got) != want {
		t.Errorf("the Dockerfile's binary: --version = %q, want %q (VERSION stamped through -ldflags)", got, want)
	}
}
