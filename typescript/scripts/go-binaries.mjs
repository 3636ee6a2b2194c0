// Builds the Go programs the end-to-end tests run, into build/bin: stipend
// (cmd/stipend) and the Go example server (examples/paidtools), unless
// STIPEND_BIN and PAIDTOOLS_BIN already name built ones (the Go test that
// runs this suite sets both). Go's build cache makes a rebuild of unchanged
// code take a moment.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const bin = fileURLToPath(new URL('../build/bin/', import.meta.url));

for (const [variable, pkg, name] of [
  ['STIPEND_BIN', './cmd/stipend', 'stipend'],
  ['PAIDTOOLS_BIN', './examples/paidtools', 'paidtools'],
]) {
  if (process.env[variable]) {
    continue;
  }
  execFileSync('go', ['build', '-o', bin + name, pkg], { cwd: repo, stdio: 'inherit' });
}
