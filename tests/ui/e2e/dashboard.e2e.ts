// First start, login/logout and the dashboard in a real browser against the real daemon:
// after N known queries, k of them blocked, the page shows N and k. Screenshots of each page
// at phone and desktop width go to $NXDNS_UI_ARTIFACTS; axe-core must find nothing serious.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, Browser, Page } from 'playwright-core';
import axe from 'axe-core';
import { Daemon, FakeUpstream, UPSTREAM_A, query } from './harness';

const ROOT = path.resolve(__dirname, '../../..');
const BIN = path.resolve(ROOT, process.env.NXDNS_BIN ?? 'build/nxdns');
const ART = path.resolve(ROOT, process.env.NXDNS_UI_ARTIFACTS ?? 'build/ui-artifacts');
const CHROMIUM = process.env.NXDNS_CHROMIUM ?? '/usr/bin/chromium';
const PASSWORD = 'correct horse battery';
const WIDTHS = { phone: { width: 390, height: 844 }, desktop: { width: 1280, height: 900 } };

const BLOCKED = ['ads.e2e.test', 'tracker.e2e.test', 'pixel.e2e.test'];
const ALLOWED = Array.from({ length: 9 }, (_, i) => `site${i}.e2e.test`);
const N = BLOCKED.length + ALLOWED.length; // 12
const K = BLOCKED.length; // 3

let up: FakeUpstream;
let nx: Daemon;
let browser: Browser;
let page: Page;
const foreign: string[] = []; // requests to any other origin
const problems: string[] = []; // console errors, page errors (a CSP refusal is one)
let rssStartKiB = 0;

async function shoot(name: string) {
  for (const [w, size] of Object.entries(WIDTHS)) {
    await page.setViewportSize(size);
    await page.waitForTimeout(150); // the chart resizes on a ResizeObserver tick
    await page.screenshot({ path: path.join(ART, `${name}-${w}.png`), fullPage: true });
  }
  await page.setViewportSize(WIDTHS.desktop);
}

async function axeCheck(label: string) {
  await page.evaluate(axe.source); // through the debugger: the page's CSP allows no inline script
  for (const size of Object.values(WIDTHS)) {
    await page.setViewportSize(size);
    const r = await page.evaluate(() => (window as any).axe.run(document, { resultTypes: ['violations'] }));
    const bad = (r.violations as any[]).filter((v) => v.impact === 'serious' || v.impact === 'critical');
    expect(bad.map((v) => `${label} @${size.width}px: ${v.id}: ${v.help} (${v.nodes.map((n: any) => n.target).join(' ')})`)).toEqual([]);
  }
  await page.setViewportSize(WIDTHS.desktop);
}

const text = (testid: string) => page.getByTestId(testid).innerText();

beforeAll(async () => {
  expect(fs.existsSync(BIN), `${BIN} (build it first)`).toBe(true);
  expect(fs.existsSync(CHROMIUM), `${CHROMIUM} (scripts/bootstrap installs Debian's chromium)`).toBe(true);
  fs.mkdirSync(ART, { recursive: true });
  up = await new FakeUpstream().start();
  nx = new Daemon(BIN, up.port, { blocked: BLOCKED });
  await nx.start();
  rssStartKiB = nx.rssKiB();
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] });
  const ctx = await browser.newContext({ viewport: WIDTHS.desktop });
  page = await ctx.newPage();
  page.on('request', (r) => {
    if (!r.url().startsWith(nx.base + '/') && !r.url().startsWith('data:')) foreign.push(r.url());
  });
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page: ${e.message}`));
});

afterAll(async () => {
  await browser?.close();
  const code = await nx?.stop();
  await up?.stop();
  if (code !== 0) {
    throw new Error(`nxdns exited ${code}:\n${nx.log()}`);
  }
});

describe('web admin', () => {
  it('serves the app with strict headers, caching and 404 JSON for unknown API paths', async () => {
    const r = await fetch(`${nx.base}/`, { headers: { 'Accept-Encoding': 'gzip' } });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(r.headers.get('content-encoding')).toBe('gzip');
    expect(r.headers.get('cache-control')).toBe('no-cache');
    const csp = r.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe-inline');
    expect(r.headers.get('referrer-policy')).toBe('no-referrer');
    expect(r.headers.get('x-content-type-options')).toBe('nosniff');
    const html = await r.text();
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/); // no inline script
    const etag = r.headers.get('etag')!;
    expect(etag).toMatch(/^"[0-9a-f]+-gz"$/);
    const again = await fetch(`${nx.base}/`, { headers: { 'Accept-Encoding': 'gzip', 'If-None-Match': etag } });
    expect(again.status).toBe(304);
    expect(await again.text()).toBe('');

    // The identity coding for a client without gzip: its own ETag, a 200 for the gzip one.
    const plain = await fetch(`${nx.base}/`, { headers: { 'Accept-Encoding': 'identity', 'If-None-Match': etag } });
    expect(plain.status).toBe(200);
    expect(plain.headers.get('content-encoding')).toBeNull();
    expect(plain.headers.get('etag')).toBe(etag.replace('-gz', ''));
    expect(await plain.text()).toBe(html);

    const js = /src="(\/assets\/[^"]+\.js)"/.exec(html)![1];
    const a = await fetch(`${nx.base}${js}`);
    expect(a.status).toBe(200);
    expect(a.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(a.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');

    for (const p of ['/api/nope', '/api/stats/nope', '/assets/missing.js']) {
      const n = await fetch(`${nx.base}${p}`);
      expect(n.status, p).toBe(404);
      expect(n.headers.get('content-type')).toBe('application/json');
      expect((await n.json()).error).toBe('not_found');
    }
    const post = await fetch(`${nx.base}/api/nope`, { method: 'POST' });
    expect(post.status).toBe(404);
  });

  it('first start: setup with the token from the log opens the dashboard', async () => {
    await page.goto(nx.base + '/');
    await expect.poll(() => page.getByRole('heading', { level: 1 }).innerText()).toBe('Set up nxdns');
    await shoot('setup');
    await axeCheck('setup');

    // keyboard: the token field has the focus, Tab moves on to the password; before the
    // token field there is only the skip link
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('token');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('password');
    await page.keyboard.press('Shift+Tab');
    await page.keyboard.press('Shift+Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Skip to content');
    expect(await page.getByText('Skip to content').isVisible()).toBe(true);

    await page.getByLabel('Setup token').fill('A'.repeat(43));
    await page.getByLabel('New password').fill(PASSWORD);
    await page.getByLabel('Repeat the password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Set password' }).click();
    await expect.poll(() => page.locator('#token-err').innerText()).toContain('wrong setup token');
    expect(await page.getByLabel('Setup token').getAttribute('aria-invalid')).toBe('true');
    await shoot('setup-error');

    await page.getByLabel('Setup token').fill(nx.setupToken());
    await page.getByRole('button', { name: 'Set password' }).click();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).innerText()).toBe('Dashboard');
  });

  it('logout, a wrong password, then login', async () => {
    await page.getByRole('button', { name: 'Log out' }).click();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).innerText()).toBe('Log in');
    await expect.poll(() => page.getByRole('status').innerText()).toBe('You are logged out.');
    await shoot('login');
    await axeCheck('login');
    await page.getByLabel('Admin password').fill('wrong password');
    await page.keyboard.press('Enter'); // the form submits from the keyboard
    await expect.poll(() => page.locator('#password-err').innerText()).toBe('wrong password');
    await page.getByLabel('Admin password').fill(PASSWORD);
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByRole('heading', { level: 1 }).innerText()).toBe('Dashboard');
  });

  it(`shows ${N} queries and ${K} blocked after they are sent over DNS`, async () => {
    for (const name of [...ALLOWED, ...BLOCKED]) {
      const r = await query(nx.dnsPort, name);
      expect(r.rcode, name).toBe(0);
      expect(r.a, name).toEqual([BLOCKED.includes(name) ? '0.0.0.0' : UPSTREAM_A.join('.')]);
    }
    expect(up.received).toBe(ALLOWED.length);

    // read from the page, as a person would: the dashboard refreshes by itself
    await expect.poll(() => text('stat-queries'), { timeout: 30_000, interval: 500 }).toBe(String(N));
    expect(await text('stat-blocked')).toBe(String(K));
    const blockedCard = await page.locator('[data-stat="blocked"]').innerText();
    expect(blockedCard).toContain(`${((100 * K) / N).toFixed(1)}\u00a0%`);
    expect(await text('stat-clients')).toBe('1');
    expect(await text('stat-entries')).toBe(String(K));
    await expect.poll(() => page.getByTestId('top-blocked').innerText(), { timeout: 15_000 })
      .toContain(BLOCKED[0]);
    const topBlocked = await page.getByTestId('top-blocked').locator('li').allInnerTexts();
    expect(topBlocked.length).toBe(K);
    expect(await page.getByTestId('top-clients').innerText()).toContain('127.0.0.1');
    expect(await page.locator('figure.chart figcaption').innerText())
      .toContain(`${N} queries, ${K} blocked`);
    expect(await page.locator('canvas').count()).toBeGreaterThan(0);
    expect(await text('stat-rss')).toMatch(/MiB$/);
    expect(await page.locator('table.owners tbody tr').count()).toBeGreaterThan(0);
    await shoot('dashboard');
    await axeCheck('dashboard');
    const rss = nx.rssKiB();
    console.log(`nxdns VmRSS: ${rssStartKiB} KiB at start, ${rss} KiB with the dashboard open (+${rss - rssStartKiB} KiB)`);
  });

  it('made no request to another host and logged no error (CSP included)', () => {
    expect(foreign).toEqual([]);
    // the wrong token and password answers are 401s the browser logs as failed loads
    expect(problems.filter((p) => !/status of 401/.test(p))).toEqual([]);
  });
});
