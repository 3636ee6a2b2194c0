// Copies the wallet MCP App (portal/dist/wallet.html, built by portal/web)
// into dist/, where the gate reads it (Gate.addWallet) and npm pack ships it.
// Run by the build, pretest and prepack scripts, after tsc.
import { copyFileSync, mkdirSync } from 'node:fs';

const from = new URL('../../portal/dist/wallet.html', import.meta.url);
const to = new URL('../dist/wallet.html', import.meta.url);
mkdirSync(new URL('.', to), { recursive: true });
copyFileSync(from, to);
