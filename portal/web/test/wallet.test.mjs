// The wallet in a real browser (headless Debian Chromium driven by
// playwright-core), against the `stipend serve` and MCP host backend that
// portal/browser_test.go starts and seeds: the /portal page (balance,
// chart, refunds, receipts verified and a tampered one refused, top-up to
// stripe-mock's Checkout, auto top-up, phone width), the same wallet as an
// MCP App inside a host page, and an expired session refused.
import assert from "node:assert/strict";
import { mkdtemp, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { chromium } from "playwright-core";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run this suite through go test ./portal (TestBrowser)`);
  return v;
};
const STIPEND = env("STIPEND_URL");
const HOST_BACKEND = env("HOST_BACKEND");
const here = path.dirname(fileURLToPath(import.meta.url));
const shots = process.env.SCREENSHOTS_DIR || path.join(env("WORK_DIR"), "screenshots");

let context;
const offsite = []; // requests that left loopback
const checkouts = []; // Stripe Checkout pages the browser was sent to

before(async () => {
  await mkdir(shots, { recursive: true });
  const profile = await mkdtemp(path.join(tmpdir(), "stipend-chromium-"));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: env("CHROMIUM"),
    headless: true,
    locale: "en-US",
    timezoneId: "UTC",
    viewport: { width: 1280, height: 900 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  // Nothing may leave loopback but the navigation to Stripe's Checkout,
  // which is answered here (the test has no Internet).
  await context.route("**/*", (route) => {
    const url = new URL(route.request().url());
    if (url.hostname === "127.0.0.1") return route.continue();
    if (url.hostname.endsWith("stripe.com") && route.request().isNavigationRequest()) {
      checkouts.push(url.href);
      return route.fulfill({ status: 200, contentType: "text/html", body: "<!doctype html><title>Checkout</title><h1>Stripe Checkout (test)</h1>" });
    }
    offsite.push(url.href);
    return route.abort();
  });
});

after(async () => {
  await context?.close();
});

async function jwksKid() {
  const jwks = await (await fetch(`${STIPEND}/.well-known/jwks.json`)).json();
  return jwks.keys[0].kid;
}

async function openWallet(url, viewport) {
  const page = await context.newPage();
  if (viewport) await page.setViewportSize(viewport);
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  await page.goto(url);
  await page.locator("main[data-ready=true]").waitFor();
  return { page, errors };
}

test("the portal page shows the balance, chart, calls and verified receipts, and takes the token out of its URL", async () => {
  const { page, errors } = await openWallet(env("PORTAL_URL"));
  assert.equal(new URL(page.url()).search, "", "the token stays in the URL");
  const kept = await page.evaluate(() => sessionStorage.getItem("stipend.portal.token"));
  assert.match(kept, /^stp_portal_/);
  assert.equal(await page.getByTestId("agent").textContent(), "alice");
  // 35.00 paid, 2.55 charged, 0.25 refunded, 3.00 held.
  assert.equal(await page.getByTestId("available-USD").textContent(), "$29.70");
  await page.locator('[data-testid="balance"] td', { hasText: "$3.00" }).waitFor();
  assert.equal(await page.locator('[data-testid="chart"] canvas').count(), 1, "the chart is drawn");
  const day = page.locator('[data-testid="usage-table"] tbody tr');
  assert.equal(await day.count(), 1);
  assert.match(await day.first().textContent(), /5\$2\.30/);
  const byTool = await page.getByTestId("breakdown").textContent();
  assert.match(byTool, /search \/ query3\$0\.50/);
  assert.match(byTool, /search \/ summarize1\$1\.20/);
  await page.selectOption("#usage-groupby", "hour");
  await page.locator('[data-testid="usage-table"] th', { hasText: "Hour" }).waitFor();
  await page.selectOption("#usage-breakdown", "service");
  await page.locator('[data-testid="breakdown"] td', { hasText: "search" }).first().waitFor();
  await page.selectOption("#usage-breakdown", "member");
  await page.locator('[data-testid="breakdown"] th', { hasText: "Member" }).waitFor();
  assert.match(await page.getByTestId("breakdown").textContent(), /alice5\$2\.30/);
  const calls = page.locator('[data-testid="consumptions"] tbody tr');
  assert.equal(await calls.count(), 5);
  assert.equal(await page.locator('[data-testid="consumptions"] td.refunded').count(), 1);
  const kid = await jwksKid();
  const receipts = page.locator('[data-testid="receipt"][data-verified="true"]');
  assert.equal(await receipts.count(), 2);
  assert.match(await receipts.first().textContent(), new RegExp(`Verified, signed by key ${kid}`));
  // Every control has a label.
  const unlabelled = await page.evaluate(() => [...document.querySelectorAll("input, select")].filter((el) => el.labels.length === 0).map((el) => el.id));
  assert.deepEqual(unlabelled, []);
  await page.selectOption("#usage-groupby", "day");
  await page.locator('[data-testid="usage-table"] th', { hasText: "Day" }).waitFor();
  await page.screenshot({ path: path.join(shots, "portal-desktop.png"), fullPage: true });
  assert.deepEqual(errors, []);
  await page.close();
});

test("a receipt tampered by one byte shows as not verified", async () => {
  // The receipts as the server sent them, but the first one's signed
  // payload changed in one character (the middle one: never just padding).
  const { page: p2 } = await openWallet(env("PORTAL_URL"));
  await p2.route("**/v1/accounts/alice/receipts*", async (route) => {
    const res = await route.fetch();
    const body = await res.json();
    const [h, payload, sig] = body.items[0].jws.split(".");
    const i = Math.floor(payload.length / 2);
    body.items[0].jws = [h, payload.slice(0, i) + (payload[i] === "A" ? "B" : "A") + payload.slice(i + 1), sig].join(".");
    await route.fulfill({ response: res, json: body });
  });
  await p2.getByRole("button", { name: "Refresh" }).click();
  const bad = p2.locator('[data-testid="receipt"][data-verified="false"]');
  await bad.waitFor();
  assert.equal(await bad.count(), 1);
  assert.match(await bad.textContent(), /NOT verified: the signature does not verify \(key /);
  assert.equal(await p2.locator('[data-testid="receipt"][data-verified="true"]').count(), 1);
  await p2.close();
});

test("the portal fits a phone's width", async () => {
  const { page, errors } = await openWallet(env("PORTAL_URL"), { width: 390, height: 844 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(overflow <= 0, `the page is ${overflow}px wider than the phone`);
  await page.screenshot({ path: path.join(shots, "portal-phone.png"), fullPage: true });
  assert.deepEqual(errors, []);
  await page.close();
});

test("auto top-up asks for a saved card first, and the top-up button goes to Stripe Checkout", async () => {
  const { page } = await openWallet(env("PORTAL_URL"));
  await page.getByRole("button", { name: "Turn on auto top-up" }).click();
  await page.getByTestId("status").filter({ hasText: "needs a saved card" }).waitFor();
  // By keyboard: focus the amount, type, and submit with Enter.
  await page.getByLabel("Amount").focus();
  await page.keyboard.press("Control+A");
  await page.keyboard.type("12.50");
  const before = checkouts.length;
  await Promise.all([page.waitForURL(/stripe\.com/), page.keyboard.press("Enter")]);
  assert.equal(checkouts.length, before + 1);
  await page.close();
});

let hostScript; // the host page's script, bundled once

// host starts the test host page rendering the wallet app for agent with
// the tool result first.
async function host(agent, toolResult, openedLinks) {
  const resource = await (await fetch(`${HOST_BACKEND}/resource`)).json();
  const contents = resource.contents[0];
  assert.equal(contents.mimeType, "text/html;profile=mcp-app");
  hostScript ??= build({ entryPoints: [path.join(here, "host.js")], bundle: true, write: false, format: "esm", logLevel: "warning" });
  const bundle = await hostScript;
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.exposeFunction("hostCallTool", async (who, params) => {
    const res = await fetch(`${HOST_BACKEND}/call?agent=${encodeURIComponent(who)}`, { method: "POST", body: JSON.stringify(params) });
    return res.json();
  });
  await page.exposeFunction("hostOpenLink", async (url) => {
    openedLinks.push(url);
  });
  await page.goto(`${HOST_BACKEND}/host`);
  await page.addScriptTag({ content: bundle.outputFiles[0].text, type: "module" });
  await page.waitForFunction(() => typeof window.startHost === "function");
  await page.evaluate(([html, result, domains, who]) => window.startHost(html, result, domains, who), [contents.text, toolResult, contents._meta.ui.csp.connectDomains, agent]);
  const app = page.frameLocator("iframe");
  await app.locator("main[data-ready=true]").waitFor();
  return { page, app, errors };
}

async function callTool(agent, name) {
  const res = await fetch(`${HOST_BACKEND}/call?agent=${encodeURIComponent(agent)}`, { method: "POST", body: JSON.stringify({ name, arguments: {} }) });
  assert.equal(res.status, 200);
  return res.json();
}

test("the wallet MCP App renders the wallet tool's result inside a host, verifies receipts and tops up through the host", async () => {
  const result = await callTool("alice", "wallet");
  assert.ok(!JSON.stringify(result.content).includes("stp_portal_"), "the model's text holds the token");
  const opened = [];
  const { page, app, errors } = await host("alice", result, opened);
  assert.equal(await app.getByTestId("available-USD").textContent(), "$29.70");
  const verdicts = await app.locator('[data-testid="receipt"] .verdict').allTextContents();
  assert.deepEqual(verdicts.map((v) => v.startsWith("✓ Verified")), [true, true], verdicts.join("; "));
  assert.equal(await app.locator('[data-testid="chart"] canvas').count(), 1);
  await app.getByRole("button", { name: "Top up" }).click();
  await app.getByTestId("checkout-link").waitFor();
  assert.equal(opened.length, 1);
  assert.match(opened[0], /stripe\.com/);
  await page.setViewportSize({ width: 480, height: 1100 });
  await app.locator("figure.chart").evaluate((f) => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  await page.screenshot({ path: path.join(shots, "wallet-app.png") });
  assert.deepEqual(errors, []);
  await page.close();
});

test("a payment_required refusal links the wallet app, which mints the agent's session through the host", async () => {
  const refusal = await callTool("bob", "query");
  assert.equal(refusal.isError, true);
  assert.equal(refusal._meta["io.stipend/refusal"].error, "payment_required");
  assert.equal(refusal._meta.ui.resourceUri, "ui://stipend/wallet");
  const { page, app } = await host("bob", refusal, []);
  assert.equal(await app.getByTestId("agent").textContent(), "bob");
  await app.getByText("Nothing to spend yet").waitFor();
  await page.close();
});

test("an expired session is refused, and the page says so", async () => {
  const wait = Date.parse(env("EXPIRING_AT")) + 1500 - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  const { page } = await openWallet(env("EXPIRING_URL"));
  await page.getByTestId("expired").waitFor();
  assert.equal(new URL(page.url()).search, "");
  assert.equal(await page.evaluate(() => sessionStorage.getItem("stipend.portal.token")), null);
  await page.close();
  assert.deepEqual(offsite, [], "requests left loopback");
});
