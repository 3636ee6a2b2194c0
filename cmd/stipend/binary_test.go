package main_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// binDir holds the stipend binaries the tests build; TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "stipend-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// The builds are shared by the tests of one run: each variant builds once.
var builds sync.Map // tags -> *binary

type binary struct {
	once sync.Once
	path string
	err  error
}

// The failpoint build of stipend: the crash test's binary, with the
// failpoint of failpoint.go (the shipped build has none).
const (
	failpointTag = "failpoint"
	// failpointArm is the environment entry that arms the failpoint.
	failpointArm = "STIPEND_TEST_FAILPOINT=ledger-after-handler"
)

// stipendBinary returns the real stipend binary built with the build tag
// tag ("" builds the shipped binary).
func stipendBinary(t *testing.T, tag string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(tag, &binary{})
	b := v.(*binary)
	b.once.Do(func() {
		b.path = filepath.Join(binDir, "stipend")
		args := []string{"build", "-o"}
		if tag != "" {
			b.path += "-" + tag
			args = append(args, b.path, "-tags", tag, ".")
		} else {
			args = append(args, b.path, ".")
		}
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go %q: %v\n%s", args, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// TestBinary_NoFailpoint: the shipped binary holds no trace of the crash
// test's failpoint, which only the failpoint build compiles in.
func TestBinary_NoFailpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	b, err := os.ReadFile(stipendBinary(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"STIPEND_TEST_FAILPOINT", "ledger-after-handler", "ledger-before-handler", "STIPEND_TEST_LEDGER_RECLAIM_AFTER", "test failpoint armed"} {
		if bytes.Contains(b, []byte(s)) {
			t.Errorf("the shipped binary contains %q, want no failpoint code in it", s)
		}
	}
}
