// The query log page in a real browser against the real daemon: known queries over DNS, some
// blocked; the page finds a blocked one, says why, allows it with one click (then the name
// resolves over DNS), and undo restores the block. Filters, pages and the live stream are read
// from the page as a person would. Screenshots at phone and desktop width, axe-core clean.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, Browser, BrowserContext, Page } from 'playwright-core';
import axe from 'axe-core';
import { Daemon, FakeUpstream, UPSTREAM_A, query, queryTcp } from './harness';

const ROOT = path.resolve(__dirname, '../../..');
const BIN = path.resolve(ROOT, process.env.NXDNS_BIN ?? 'build/nxdns');
const ART = path.resolve(ROOT, process.env.NXDNS_UI_ARTIFACTS ?? 'build/ui-artifacts');
const CHROMIUM = process.env.NXDNS_CHROMIUM ?? '/usr/bin/chromium';
const PASSWORD = 'correct horse battery';
const WIDTHS = { phone: { width: 390, height: 844 }, desktop: { width: 1280, height: 900 } };

const BLOCKED = ['ads.e2e.test', 'tracker.e2e.test'];
const ALLOWED = ['site0.e2e.test', 'site1.e2e.test', 'site2.e2e.test'];
const PAGED = Array.from({ length: 53 }, (_, i) => `page${i}.e2e.test`); // over one page (50)
const BLOCK_A = '0.0.0.0';
const UP_A = UPSTREAM_A.join('.');

let up: FakeUpstream;
let nx: Daemon;
let browser: Browser;
let ctx: BrowserContext;
let page: Page;
const problems: string[] = [];

async function shoot(name: string) {
  for (const [w, size] of Object.entries(WIDTHS)) {
    await page.setViewportSize(size);
    await page.waitForTimeout(150);
    await page.screenshot({ path: path.join(ART, `${name}-${w}.png`), fullPage: true });
  }
  await page.setViewportSize(WIDTHS.desktop);
}

async function axeCheck(label: string) {
  await page.evaluate(axe.source);
  for (const size of Object.values(WIDTHS)) {
    await page.setViewportSize(size);
    const r = await page.evaluate(() => (window as any).axe.run(document, { resultTypes: ['violations'] }));
    const bad = (r.violations as any[]).filter((v) => v.impact === 'serious' || v.impact === 'critical');
    expect(bad.map((v) => `${label} @${size.width}px: ${v.id}: ${v.help} (${v.nodes.map((n: any) => n.target).join(' ')})`)).toEqual([]);
  }
  await page.setViewportSize(WIDTHS.desktop);
}

/** The A answer for name, polled: a rule change applies after the reload the request made. */
async function resolvesTo(name: string, want: string) {
  await expect.poll(async () => (await query(nx.dnsPort, name)).a.join(','), { timeout: 10_000, interval: 200 })
    .toBe(want);
}

const rows = () => page.getByTestId('query-row');
const rowNames = () => rows().evaluateAll((els) => els.map((e) => e.getAttribute('data-name')));
const row = (name: string) => page.locator(`[data-testid="query-row"][data-name="${name}"]`);

beforeAll(async () => {
  expect(fs.existsSync(BIN), `${BIN} (build it first)`).toBe(true);
  expect(fs.existsSync(CHROMIUM), `${CHROMIUM} (scripts/bootstrap installs Debian's chromium)`).toBe(true);
  fs.mkdirSync(ART, { recursive: true });
  up = await new FakeUpstream().start();
  nx = new Daemon(BIN, up.port, { blocked: BLOCKED });
  await nx.start();
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] });
  ctx = await browser.newContext({ viewport: WIDTHS.desktop });
  page = await ctx.newPage();
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page: ${e.message}`));
  // The first-start setup has its own test (dashboard.e2e.ts): here through the API, in the
  // browser context so the page shares the session cookie.
  const r = await ctx.request.post(`${nx.base}/api/auth/setup`,
    { data: { token: nx.setupToken(), password: PASSWORD } });
  expect(r.status(), await r.text()).toBe(200);
});

afterAll(async () => {
  await browser?.close();
  const code = await nx?.stop();
  await up?.stop();
  if (code !== 0) {
    throw new Error(`nxdns exited ${code}:\n${nx.log()}`);
  }
});

describe('query log page', () => {
  it('lists the queries sent over DNS, newest first, and says why each was blocked', async () => {
    for (const name of [...ALLOWED, ...BLOCKED]) {
      // site2 over TCP: the protocol filter has one row to find
      const r = await (name === 'site2.e2e.test' ? queryTcp : query)(nx.dnsPort, name);
      expect(r.a, name).toEqual([BLOCKED.includes(name) ? BLOCK_A : UP_A]);
    }
    await page.goto(nx.base + '/');
    await page.getByRole('link', { name: 'Query log' }).click();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).innerText()).toBe('Query log');
    expect(await page.title()).toBe('Query log · nxdns');
    // the writer flushes in batches: reload the history until every query is in
    const want = [...ALLOWED, ...BLOCKED].reverse();
    await expect.poll(async () => {
      await page.getByRole('button', { name: 'Search' }).click();
      await page.waitForTimeout(300);
      return rowNames();
    }, { timeout: 20_000, interval: 500 }).toEqual(want);
    const ads = row('ads.e2e.test');
    expect(await ads.innerText()).toContain('Blocked: ads.e2e.test is on the list “e2e”.');
    expect(await ads.locator('.badge').innerText()).toMatch(/blocked/i);
    expect(await row('site0.e2e.test').innerText()).toContain(`No rule matched: forwarded to`);
    expect(await ads.innerText()).toContain('127.0.0.1');
    await shoot('querylog');
    await axeCheck('querylog');
  });

  it('filters by name, status, protocol, client and time range', async () => {
    await page.getByLabel('Name contains').fill('tracker');
    await page.getByRole('button', { name: 'Search' }).click();
    await expect.poll(rowNames).toEqual(['tracker.e2e.test']);

    await page.getByLabel('Name contains').fill('');
    await page.getByLabel('Status').selectOption('blocked');
    await page.getByLabel('Name contains').press('Enter'); // the form submits from the keyboard
    await expect.poll(rowNames).toEqual(['tracker.e2e.test', 'ads.e2e.test']);
    await page.getByLabel('Status').selectOption('forwarded');
    await page.getByRole('button', { name: 'Search' }).click();
    await expect.poll(rowNames).toEqual([...ALLOWED].reverse());

    await page.getByLabel('Status').selectOption('all');
    await page.getByLabel('Protocol').selectOption('tcp');
    await page.getByRole('button', { name: 'Search' }).click();
    await expect.poll(rowNames).toEqual(['site2.e2e.test']);
    expect(await row('site2.e2e.test').innerText()).toContain('TCP A');
    await page.getByLabel('Protocol').selectOption('udp');
    await page.getByRole('button', { name: 'Search' }).click();
    await expect.poll(rowNames).toEqual(['tracker.e2e.test', 'ads.e2e.test', 'site1.e2e.test', 'site0.e2e.test']);
    await page.getByLabel('Protocol').selectOption('');
    await page.getByLabel('Client address').fill('127.0.0.2');
    await page.getByRole('button', { name: 'Search' }).click();
    await expect.poll(() => page.locator('#qlist-h ~ p, section .muted').allInnerTexts())
      .toContain('No query matches.');
    await page.getByLabel('Client address').fill('127.0.0.1');
    await page.getByRole('button', { name: 'Search' }).click();
    await expect.poll(async () => (await rowNames()).length).toBe(ALLOWED.length + BLOCKED.length);

    // a window that ended an hour ago holds nothing; "To" before "From" is refused at the field
    const ago = new Date(Date.now() - 3600_000);
    const local = (d: Date) => new Date(d.getTime() - d.getTimezoneOffset() * 60000).toISOString().slice(0, 16);
    await page.getByLabel('To', { exact: true }).fill(local(ago));
    await page.getByRole('button', { name: 'Search' }).click();
    await expect.poll(async () => (await rowNames()).length).toBe(0);
    await page.getByLabel('From', { exact: true }).fill(local(new Date()));
    await page.getByRole('button', { name: 'Search' }).click();
    await expect.poll(() => page.locator('#q-to-err').innerText()).toContain('must be after');
    expect(await page.getByLabel('To', { exact: true }).getAttribute('aria-invalid')).toBe('true');
    await shoot('querylog-filter-error');
    await page.getByRole('button', { name: 'Clear' }).click();
    await expect.poll(async () => (await rowNames()).length).toBe(ALLOWED.length + BLOCKED.length);
  });

  it('allows a blocked name with one click: it resolves; undo blocks it again', async () => {
    await resolvesTo('ads.e2e.test', BLOCK_A);
    await page.getByRole('button', { name: 'Allow ads.e2e.test' }).click();
    await expect.poll(() => page.getByTestId('rule-notice').innerText())
      .toContain('Allowed ads.e2e.test');
    const rules = await (await ctx.request.get(`${nx.base}/api/filter/rules`)).json();
    expect(rules.allow).toEqual(['ads.e2e.test']);
    await resolvesTo('ads.e2e.test', UP_A);
    await shoot('querylog-allowed');

    await page.getByRole('button', { name: 'Undo' }).focus();
    await page.keyboard.press('Enter'); // from the keyboard; the focus then rests on the notice
    await expect.poll(() => page.getByTestId('rule-notice').innerText()).toContain('Undone');
    await expect.poll(() => page.evaluate(() => document.activeElement?.classList.contains('notice'))).toBe(true);
    expect((await (await ctx.request.get(`${nx.base}/api/filter/rules`)).json()).allow).toEqual([]);
    await resolvesTo('ads.e2e.test', BLOCK_A);
    expect(await page.getByRole('button', { name: 'Undo' }).count()).toBe(0);

    // and the other way round: block a forwarded name, then undo
    await page.getByRole('button', { name: 'Block site1.e2e.test' }).click();
    await expect.poll(() => page.getByTestId('rule-notice').innerText()).toContain('Blocked site1.e2e.test');
    await resolvesTo('site1.e2e.test', BLOCK_A);
    await page.getByRole('button', { name: 'Undo' }).click();
    await expect.poll(() => page.getByTestId('rule-notice').innerText()).toContain('Undone');
    await resolvesTo('site1.e2e.test', UP_A);
  });

  it('a name your allow rule let through offers to remove that rule, with undo', async () => {
    const allowRules = async () => (await (await ctx.request.get(`${nx.base}/api/filter/rules`)).json()).allow;
    await page.getByLabel('Name contains').fill('ads');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByRole('button', { name: 'Allow ads.e2e.test' }).first().click();
    await expect.poll(() => page.getByTestId('rule-notice').innerText()).toContain('Allowed ads.e2e.test');
    await resolvesTo('ads.e2e.test', UP_A); // these answers are logged as the user rule's
    await expect.poll(async () => {
      await page.getByRole('button', { name: 'Search' }).click();
      await page.waitForTimeout(300);
      return row('ads.e2e.test').first().innerText();
    }, { timeout: 20_000, interval: 500 }).toContain('Allowed by your rule “ads.e2e.test”.');
    await shoot('querylog-user-rule');

    const remove = page.getByRole('button', { name: 'Remove your allow rule ads.e2e.test' }).first();
    await remove.click();
    await expect.poll(() => page.getByTestId('rule-notice').innerText())
      .toContain('Removed your allow rule ads.e2e.test.');
    expect(await allowRules()).toEqual([]);
    await resolvesTo('ads.e2e.test', BLOCK_A);
    await page.getByRole('button', { name: 'Undo' }).click();
    await expect.poll(() => page.getByTestId('rule-notice').innerText()).toContain('Undone: Allowed ads.e2e.test');
    expect(await allowRules()).toEqual(['ads.e2e.test']);
    await resolvesTo('ads.e2e.test', UP_A);

    await remove.click(); // and leave the rules as they were
    await expect.poll(() => page.getByTestId('rule-notice').innerText()).toContain('Removed');
    await resolvesTo('ads.e2e.test', BLOCK_A);
    await page.getByRole('button', { name: 'Clear' }).click();
  });

  it('pages through more queries than one page holds', async () => {
    for (const name of PAGED) {
      await query(nx.dnsPort, name);
    }
    await page.getByLabel('Name contains').fill('page');
    const older = page.getByRole('button', { name: 'Older' });
    // Until the writer has logged every query: a full page, an older one, and the newest on top.
    await expect.poll(async () => {
      await page.getByRole('button', { name: 'Search' }).click();
      await page.waitForTimeout(300);
      const names = await rowNames();
      return names.length + (await older.isEnabled() ? 1000 : 0) +
        (names[0] === PAGED[PAGED.length - 1] ? 10000 : 0);
    }, { timeout: 20_000, interval: 500 }).toBe(11050);
    const first = await rowNames();
    expect(first[0]).toBe(PAGED[PAGED.length - 1]);
    await older.click();
    await expect.poll(rowNames).toEqual(PAGED.slice(0, 3).reverse());
    expect(await older.isEnabled()).toBe(false);
    await page.getByRole('button', { name: 'Newer' }).click();
    await expect.poll(rowNames).toEqual(first);
    await page.getByRole('button', { name: 'Clear' }).click();
  });

  it('shows new queries live, filtered, and pauses', async () => {
    await page.getByRole('button', { name: 'Live' }).click();
    await expect.poll(() => page.getByRole('main').getByRole('status').innerText()).toContain('Live');
    // The page says "Live" when its EventSource opens; the daemon subscribes it a moment
    // later. Ask a warm-up name until the stream carries it, then start from an empty view.
    await expect.poll(async () => {
      await query(nx.dnsPort, 'livewarm.e2e.test');
      return (await rowNames()).includes('livewarm.e2e.test');
    }, { timeout: 10_000, interval: 300 }).toBe(true);
    const liveNames = async () => (await rowNames()).filter((n) => n !== 'livewarm.e2e.test');
    await query(nx.dnsPort, 'live0.e2e.test');
    await query(nx.dnsPort, 'tracker.e2e.test');
    await expect.poll(liveNames, { timeout: 10_000 }).toEqual(['tracker.e2e.test', 'live0.e2e.test']);
    expect(await row('tracker.e2e.test').innerText()).toContain('Blocked: tracker.e2e.test is on the list “e2e”.');
    await page.getByLabel('Status').selectOption('blocked');
    await page.getByRole('button', { name: 'Search' }).click();
    await expect.poll(rowNames).toEqual(['tracker.e2e.test']);
    await shoot('querylog-live');
    await axeCheck('querylog-live');

    await page.getByRole('main').getByRole('button', { name: 'Pause', exact: true }).click();
    await expect.poll(() => page.getByRole('main').getByRole('status').innerText()).toBe('Paused.');
    await query(nx.dnsPort, 'ads.e2e.test');
    await page.waitForTimeout(1000);
    expect(await liveNames()).toEqual(['tracker.e2e.test']);
    await page.getByRole('main').getByRole('button', { name: 'Resume', exact: true }).click();
    await expect.poll(() => page.getByRole('main').getByRole('status').innerText()).toContain('Live');
    await query(nx.dnsPort, 'ads.e2e.test');
    await expect.poll(liveNames, { timeout: 10_000 }).toEqual(['ads.e2e.test', 'tracker.e2e.test']);
  });

  it('words a special-use name: which setting answered it here, never upstream', async () => {
    const before = up.received;
    // a single-label name (a LAN host) and localhost: answered by nxdns itself
    const lan = await query(nx.dnsPort, 'printer');
    expect(lan.rcode).toBe(3); // NXDOMAIN, not forwarded (special.domain_needed)
    expect((await query(nx.dnsPort, 'localhost')).a).toEqual(['127.0.0.1']);
    expect(up.received).toBe(before); // neither reached the upstream
    await page.goto(nx.base + '/');
    await page.getByRole('link', { name: 'Query log' }).click();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).innerText()).toBe('Query log');
    for (const [name, want] of [
      ['printer', 'Answered locally: printer is a single-label name, a name of this network that public DNS cannot know, so it is not forwarded (setting special.domain_needed).'],
      ['localhost', 'Answered locally with the loopback address: localhost names never leave this host (setting special.localhost).'],
    ]) {
      await page.getByLabel('Name contains').fill(name);
      await expect.poll(async () => {
        await page.getByRole('button', { name: 'Search' }).click();
        await page.waitForTimeout(300);
        return row(name).count();
      }, { timeout: 20_000, interval: 500 }).toBeGreaterThan(0);
      expect(await row(name).first().innerText()).toContain(want);
    }
    await shoot('querylog-special');
    await axeCheck('querylog special');
  });

  it('logged no error in the page', () => {
    expect(problems).toEqual([]);
  });
});
