// The package as a stranger installs it: npm pack (prepack builds dist/),
// the tarball installed into a fresh npm project (npm init -y, ESM), and the
// README's own example server run from it over stdio, charging a real
// stipend serve.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { type Charge, META, type Refusal } from '@stipend-mcp/stipend';

import { type Stipend, credits, fund, startStipend } from './support/stipend.js';

const run = promisify(execFile);
const pkgDir = fileURLToPath(new URL('../..', import.meta.url));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

/** The versions the fresh project installs beside the tarball: those this package is tested with. */
async function pinned(name: string): Promise<string> {
  const pkg = JSON.parse(await readFile(join(pkgDir, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
  const v = pkg.devDependencies[name];
  assert.ok(v, `no devDependency ${name}`);
  return `${name}@${v}`;
}

/** The first ```js block of the README: the example a stranger copies. */
async function readmeExample(): Promise<string> {
  const readme = await readFile(join(pkgDir, 'README.md'), 'utf8');
  const m = /```js\n([\s\S]*?)```/.exec(readme);
  assert.ok(m?.[1], 'the README has no ```js example');
  return m[1];
}

describe('the packed package in a fresh project', () => {
  let dir: string;
  let stipend: Stipend;
  let files: string[];
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'stipend-pack-'));
    const { stdout } = await run(npm, ['pack', '--json', '--pack-destination', dir], { cwd: pkgDir, maxBuffer: 16 << 20 });
    const [packed] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
    assert.ok(packed);
    files = packed.files.map((f) => f.path);
    const project = join(dir, 'project');
    await run('mkdir', [project]);
    await run(npm, ['init', '-y'], { cwd: project });
    await run(npm, ['pkg', 'set', 'type=module'], { cwd: project });
    await run(
      npm,
      ['install', '--no-audit', '--no-fund', '--prefer-offline', join(dir, packed.filename), await pinned('@modelcontextprotocol/sdk'), await pinned('zod')],
      { cwd: project, maxBuffer: 16 << 20 },
    );
    await writeFile(join(project, 'server.js'), await readmeExample());
    stipend = await startStipend();
  });
  after(async () => {
    await stipend?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  test('the tarball holds the built package, its types and the licence, and no tests', () => {
    for (const want of ['package.json', 'README.md', 'LICENSE', 'dist/index.js', 'dist/index.d.ts', 'dist/client/index.js']) {
      assert.ok(files.includes(want), `the tarball lacks ${want}: ${files.join(' ')}`);
    }
    assert.deepEqual(
      files.filter((f) => !f.startsWith('dist/') && !['package.json', 'README.md', 'LICENSE'].includes(f)),
      [],
      'the tarball holds files beyond dist/, the README and the licence',
    );
  });

  test("the README's example charges a paid call and refuses the unpaid ones", async () => {
    const agent = 'pack-agent';
    const ent = await fund(stipend, agent, 20);
    const client = new Client({ name: 'pack-test', version: '1.0.0' });
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: ['server.js'],
        cwd: join(dir, 'project'),
        env: { PATH: process.env.PATH ?? '', STIPEND_URL: stipend.url, STIPEND_HOST_KEY: stipend.keys.host },
      }),
    );
    try {
      const { tools } = await client.listTools();
      assert.deepEqual(tools.find((t) => t.name === 'forecast')?._meta?.[META.price], { cost: { cents: 5, currency: 'USD' }, units: 1, policy: 'on_success' });
      const paid = (await client.callTool({ name: 'forecast', arguments: { city: 'Oslo' }, _meta: { [META.agentId]: agent } })) as CallToolResult;
      assert.equal(paid.isError, undefined, JSON.stringify(paid));
      assert.equal((paid._meta?.[META.consumption] as Charge).result, 'consumed');
      assert.deepEqual(await credits(stipend, ent), { balance: 15, held: 0 });

      const anonymous = (await client.callTool({ name: 'forecast', arguments: { city: 'Oslo' } })) as CallToolResult;
      assert.equal((anonymous._meta?.[META.refusal] as Refusal).error, 'agent_unknown');
      const broke = (await client.callTool({ name: 'forecast', arguments: { city: 'Oslo' }, _meta: { [META.agentId]: 'pack-broke' } })) as CallToolResult;
      assert.equal((broke._meta?.[META.refusal] as Refusal).error, 'payment_required');
      const text = broke.content[0]?.type === 'text' ? broke.content[0].text : '';
      assert.ok(text.includes('https://example.com/buy'), text);
    } finally {
      await client.close();
    }
  });
});
