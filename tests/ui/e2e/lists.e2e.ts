// The Lists page in a real browser against the real daemon: a list served by a local HTTP
// server on loopback (started here, stopped in afterAll) is added through the form, refreshed
// with the button, and its entries and skipped lines are read from the page; the name it
// lists is then blocked over DNS and the lookup names the list. Bad input (a URL that is not
// http(s), a bad name, an unknown group, a bad lookup name) shows the server's message at the
// field. Screenshots at phone and desktop width go to $NXDNS_UI_ARTIFACTS; axe-core must find
// nothing serious.
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, Browser, Page } from 'playwright-core';
import axe from 'axe-core';
import { Daemon, FakeUpstream, query } from './harness';

const ROOT = path.resolve(__dirname, '../../..');
const BIN = path.resolve(ROOT, process.env.NXDNS_BIN ?? 'build/nxdns');
const ART = path.resolve(ROOT, process.env.NXDNS_UI_ARTIFACTS ?? 'build/ui-artifacts');
const CHROMIUM = process.env.NXDNS_CHROMIUM ?? '/usr/bin/chromium';
const PASSWORD = 'correct horse battery';
const WIDTHS = { phone: { width: 390, height: 844 }, desktop: { width: 1280, height: 900 } };

const CONFIG_BLOCKED = ['ads.e2e.test', 'tracker.e2e.test'];
// The served list (hosts format): 4 names, a localhost entry (line 6) and a bad name (line 7).
const WEB_NAMES = ['a.web.test', 'b.web.test', 'c.web.test', 'd.web.test'];
const WEB_LIST = ['# served by the test', ...WEB_NAMES.map((n) => `0.0.0.0 ${n}`),
  '0.0.0.0 localhost', '0.0.0.0 bad..name', ''].join('\n');

let up: FakeUpstream;
let nx: Daemon;
let web: http.Server;
let webPort = 0;
let webHits = 0;
let browser: Browser;
let page: Page;
const foreign: string[] = [];
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

const source = (name: string) => page.locator(`li.source[data-source="${name}"]`);
const fieldError = (id: string) => page.locator(`#${id}-err`);

async function addSource(name: string, url: string, format = 'hosts') {
  await page.getByLabel('Name', { exact: true }).first().fill(name);
  await page.getByLabel('Download from a URL').check();
  await page.getByLabel('URL', { exact: true }).fill(url);
  await page.getByLabel('Format').selectOption(format);
  await page.getByRole('button', { name: 'Add source' }).click();
}

beforeAll(async () => {
  expect(fs.existsSync(BIN), `${BIN} (build it first)`).toBe(true);
  expect(fs.existsSync(CHROMIUM), `${CHROMIUM} (scripts/bootstrap installs Debian's chromium)`).toBe(true);
  fs.mkdirSync(ART, { recursive: true });
  // The list host: loopback only, one path, short timeouts; closed in afterAll.
  web = http.createServer((req, res) => {
    webHits++;
    if (req.url !== '/list.txt') {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/plain' }).end(WEB_LIST);
  });
  web.setTimeout(5000);
  await new Promise<void>((res) => web.listen(0, '127.0.0.1', () => res()));
  webPort = (web.address() as net.AddressInfo).port;
  up = await new FakeUpstream().start();
  nx = new Daemon(BIN, up.port, { blocked: CONFIG_BLOCKED });
  await nx.start();
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
  web?.closeAllConnections();
  await new Promise<void>((res) => (web ? web.close(() => res()) : res()));
  if (code !== 0) {
    throw new Error(`nxdns exited ${code}:\n${nx.log()}`);
  }
});

describe('lists page', () => {
  it('first start: setup, then the nav opens the Lists page with the config\'s source', async () => {
    await page.goto(nx.base + '/');
    await expect.poll(() => page.getByRole('heading', { level: 1 }).innerText()).toBe('Set up nxdns');
    await page.getByLabel('Setup token').fill(nx.setupToken());
    await page.getByLabel('New password').fill(PASSWORD);
    await page.getByLabel('Repeat the password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Set password' }).click();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).innerText()).toBe('Dashboard');

    await page.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name: 'Lists' }).click();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).innerText()).toBe('Lists');
    await expect.poll(() => page.title()).toBe('Lists · nxdns');
    expect(await page.getByRole('link', { name: 'Lists' }).getAttribute('aria-current')).toBe('page');
    await expect.poll(() => page.getByTestId('entries-e2e').innerText()).toBe(String(CONFIG_BLOCKED.length));
    expect(await source('e2e').innerText()).toContain('domains');
    // a file source has nothing to download: its refresh button is off
    expect(await source('e2e').getByRole('button', { name: 'Refresh e2e now' }).isDisabled()).toBe(true);
    // a reload keeps the page (the route is in the URL)
    await page.reload();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).innerText()).toBe('Lists');
  });

  it('shows the server\'s validation errors at the field, and keeps the file unchanged', async () => {
    await addSource('bad', 'ftp://127.0.0.1/list.txt');
    await expect.poll(() => fieldError('src-location').innerText()).toContain('is not an http:// or https:// URL');
    expect(await page.locator('#src-location').getAttribute('aria-invalid')).toBe('true');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('src-location');
    await shoot('lists-error');
    await axeCheck('lists with a field error');

    await addSource('Not A Name!', `http://127.0.0.1:${webPort}/list.txt`);
    await expect.poll(() => fieldError('src-name').innerText()).toContain('is not a valid name');
    expect(await fieldError('src-location').count()).toBe(0);
    // nothing was added
    expect(await page.locator('li.source').count()).toBe(1);
    const r = await fetch(`${nx.base}/healthz`);
    expect(r.status).toBe(200);
    expect(fs.readFileSync(path.join(nx.dir, 'nxdns.yaml'), 'utf8')).not.toContain('ftp://');
  });

  it('adds a list served on loopback, refreshes it with progress, and counts its entries', async () => {
    const url = `http://127.0.0.1:${webPort}/list.txt`;
    await addSource('web', url);
    await expect.poll(() => page.getByRole('status').filter({ hasText: 'Added' }).innerText())
      .toContain('Added “web”');
    await expect.poll(() => source('web').count()).toBe(1);
    expect(await source('web').innerText()).toContain(url);
    expect(fs.readFileSync(path.join(nx.dir, 'nxdns.yaml'), 'utf8')).toContain(url);

    // Adding a URL source downloads it; the refresh must not land in the same second, since
    // the status API's fetch times are whole seconds and the page could not tell the two
    // downloads apart (a known limit: it would report the round as unchanged after 30 s).
    const end = Date.now() + 5_000;
    while (webHits === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
    await new Promise((r) => setTimeout(r, 1_100));
    await source('web').getByRole('button', { name: 'Refresh web now' }).click();
    await expect.poll(() => page.getByTestId('refresh-progress').innerText(), { timeout: 30_000, interval: 250 })
      .toContain('Refresh done: 1 updated.');
    expect(webHits).toBeGreaterThan(0);
    await expect.poll(() => page.getByTestId('entries-web').innerText(), { timeout: 15_000 })
      .toBe(String(WEB_NAMES.length));
    const card = await source('web').innerText();
    expect(card).not.toContain('Last fetch\nnever');
    expect(card).not.toContain('Last error');

    // skipped lines by reason, with the line numbers
    await source('web').getByText('Skipped lines by reason').click();
    const skips = source('web').locator('.skips tbody tr');
    await expect.poll(() => skips.count()).toBe(2);
    const rows = await skips.allInnerTexts();
    expect(rows.find((r) => r.startsWith('localhost'))).toMatch(/\t1\t6$/);
    expect(rows.find((r) => r.startsWith('invalid name'))).toMatch(/\t1\t7$/);

    // the page's count is what the resolver does
    for (const n of WEB_NAMES) {
      expect((await query(nx.dnsPort, n)).a, n).toEqual(['0.0.0.0']);
    }
    await shoot('lists');
    await axeCheck('lists');
  });

  it('refreshes all sources with progress', async () => {
    const hits = webHits;
    await page.getByRole('button', { name: 'Refresh all now' }).click();
    await expect.poll(() => page.getByTestId('refresh-progress').innerText(), { timeout: 40_000, interval: 250 })
      .toMatch(/^Refresh done: /);
    expect(webHits).toBe(hits + 1); // the round downloaded the list again
    expect(await page.getByTestId('refresh-progress').innerText()).toContain('Refresh done: 1 updated.');
    expect(await page.getByTestId('entries-web').innerText()).toBe(String(WEB_NAMES.length));
    expect(await page.getByRole('button', { name: 'Refresh all now' }).isDisabled()).toBe(false);
  });

  it('answers "which list blocks this name?"', async () => {
    await page.getByLabel('Name', { exact: true }).last().fill('x.b.web.test');
    await page.getByRole('button', { name: 'Look up' }).click();
    await expect.poll(() => page.getByTestId('lookup-result').innerText()).toBe('Allowed: no list or rule matches it.');
    await page.getByLabel('Name', { exact: true }).last().fill('b.web.test');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByTestId('lookup-result').innerText()).toBe('Blocked: a list names it (list “web”).');
    await page.getByLabel('Name', { exact: true }).last().fill('tracker.e2e.test');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByTestId('lookup-result').innerText()).toContain('list “e2e”');
    await page.getByLabel('As seen from client (optional)').fill('not-an-address');
    await page.keyboard.press('Enter');
    await expect.poll(() => fieldError('lookup-client').innerText()).toBe('invalid client address');
    await page.getByLabel('As seen from client (optional)').fill('');
    await page.getByLabel('Name', { exact: true }).last().fill('bad..name');
    await page.keyboard.press('Enter');
    await expect.poll(() => fieldError('lookup-name').innerText()).toBe('invalid name');
    expect(await page.getByTestId('lookup-result').innerText()).toBe('');
  });

  it('looks up a name for a record type and a client id', async () => {
    const asked: string[] = [];
    const onReq = (r: { url(): string }) => { if (r.url().includes('/api/lookup?')) asked.push(r.url()); };
    page.on('request', onReq);
    await page.getByLabel('Name', { exact: true }).last().fill('b.web.test');
    await page.getByLabel('Record type').selectOption('AAAA');
    await page.getByLabel('Client id (optional)').fill('kid-phone');
    await page.getByRole('button', { name: 'Look up' }).click();
    await expect.poll(() => page.getByTestId('lookup-result').innerText()).toBe('Blocked for AAAA: a list names it (list “web”).');
    page.off('request', onReq);
    const q = new URL(asked[asked.length - 1]).searchParams;
    expect([q.get('name'), q.get('type'), q.get('client_id')]).toEqual(['b.web.test', 'AAAA', 'kid-phone']);
    await shoot('lists-lookup-type');
    await axeCheck('lists lookup with a type');
    await page.getByLabel('Record type').selectOption('A');
    await page.getByLabel('Client id (optional)').fill('');
  });

  it('edits a source: an unknown group is refused at the field, disabling it applies', async () => {
    await source('web').getByRole('button', { name: 'Edit web' }).click();
    await expect.poll(() => page.getByRole('heading', { name: 'Edit “web”' }).count()).toBe(1);
    expect(await page.getByLabel('URL', { exact: true }).inputValue()).toBe(`http://127.0.0.1:${webPort}/list.txt`);
    await page.getByLabel('Groups').fill('no-such-group');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await expect.poll(() => fieldError('src-groups').innerText()).toContain('no-such-group');
    await page.getByLabel('Groups').fill('');
    await page.getByLabel('Enabled').uncheck();
    await page.getByRole('button', { name: 'Save changes' }).click();
    await expect.poll(() => source('web').locator('.tag').first().innerText()).toBe('disabled');
    expect(await page.getByRole('heading', { name: 'Add a source' }).count()).toBe(1);
    // disabled: the resolver no longer blocks its names
    await expect.poll(async () => (await query(nx.dnsPort, WEB_NAMES[0])).a, { timeout: 10_000 })
      .toEqual(['192.0.2.1']);
  });

  it('adds a file source: outside the allowed directories it is refused at the field', async () => {
    const addFile = async (name: string, file: string) => {
      await page.getByLabel('Name', { exact: true }).first().fill(name);
      await page.getByLabel('A file on this box').check();
      await page.getByLabel('File path', { exact: true }).fill(file);
      await page.getByLabel('Format').selectOption('domains');
      await page.getByRole('button', { name: 'Add source' }).click();
    };
    await addFile('passwd', '/etc/passwd');
    await expect.poll(() => fieldError('src-location').innerText()).toContain('a path source added through the API must be in');
    expect(await source('passwd').count()).toBe(0);

    const file = path.join(nx.dir, 'extra.txt');
    fs.writeFileSync(file, 'one.extra.test\ntwo.extra.test\nthree.extra.test\n');
    await addFile('extra', file);
    await expect.poll(() => page.getByRole('status').filter({ hasText: 'Added' }).innerText()).toBe('Added “extra”.');
    // read by the reload the add made: no refresh needed
    await expect.poll(() => page.getByTestId('entries-extra').innerText(), { timeout: 15_000 }).toBe('3');
    expect((await query(nx.dnsPort, 'two.extra.test')).a).toEqual(['0.0.0.0']);
  });

  it('edits subdomains and hosts answers: shown on the source, written to the file, applied', async () => {
    const cfg = () => fs.readFileSync(path.join(nx.dir, 'nxdns.yaml'), 'utf8');
    expect((await query(nx.dnsPort, 'x.ads.e2e.test')).a).not.toEqual(['0.0.0.0']);
    await source('e2e').getByRole('button', { name: 'Edit e2e' }).click();
    await expect.poll(() => page.getByRole('heading', { name: 'Edit “e2e”' }).count()).toBe(1);
    // a file source's default: hosts lines with an address answer it (the server says so)
    expect(await page.getByLabel('Hosts lines with a real address').inputValue()).toBe('listed');
    expect(await page.getByLabel('Entries cover their subdomains').isChecked()).toBe(false);
    await page.getByLabel('Entries cover their subdomains').check();
    await page.getByRole('button', { name: 'Save changes' }).click();
    await expect.poll(() => page.getByTestId('options-e2e').innerText()).toBe('entries cover their subdomains');
    expect(cfg()).toMatch(/"subdomains": true/);
    expect(cfg()).not.toMatch(/hosts_answers/); // unchanged: not written
    await expect.poll(async () => (await query(nx.dnsPort, 'x.ads.e2e.test')).a).toEqual(['0.0.0.0']);

    await source('e2e').getByRole('button', { name: 'Edit e2e' }).click();
    expect(await page.getByLabel('Entries cover their subdomains').isChecked()).toBe(true);
    await page.getByLabel('Hosts lines with a real address').selectOption('null');
    await shoot('lists-source-options');
    await axeCheck('lists source options');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await expect.poll(() => cfg()).toMatch(/"hosts_answers": null/);
    await source('e2e').getByRole('button', { name: 'Edit e2e' }).click();
    expect(await page.getByLabel('Hosts lines with a real address').inputValue()).toBe('null');
    await page.getByLabel('Entries cover their subdomains').uncheck();
    await page.getByRole('button', { name: 'Save changes' }).click();
    await expect.poll(() => page.getByTestId('options-e2e').count()).toBe(0);
    expect(cfg()).toMatch(/"subdomains": false/);
    await expect.poll(async () => (await query(nx.dnsPort, 'x.ads.e2e.test')).a).not.toEqual(['0.0.0.0']);
  });

  it('removes a source after a confirmation', async () => {
    await source('web').getByRole('button', { name: 'Remove web' }).click();
    await source('web').getByRole('button', { name: 'Keep' }).click();
    expect(await source('web').count()).toBe(1);
    await source('web').getByRole('button', { name: 'Remove web' }).click();
    await source('web').getByRole('button', { name: 'Confirm: remove web' }).click();
    await expect.poll(() => source('web').count()).toBe(0);
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('sources-h');
    await expect.poll(() => page.getByRole('status').filter({ hasText: 'Removed' }).innerText()).toBe('Removed “web”.');
    expect(await source('e2e').count()).toBe(1);
    expect(fs.readFileSync(path.join(nx.dir, 'nxdns.yaml'), 'utf8')).not.toContain(`${webPort}/list.txt`);
  });

  it('made no request to another host and logged no error but the refusals', () => {
    expect(foreign).toEqual([]);
    // the refused edits and lookups are 400s the browser logs as failed loads
    expect(problems.filter((p) => !/status of 400/.test(p))).toEqual([]);
  });
});
