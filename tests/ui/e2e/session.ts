// What the browser suites of the edit pages share (pages.e2e.ts, settings.e2e.ts): the daemon
// and the fake upstream, chromium with one signed-in page, screenshots at phone and desktop
// width, the axe-core check, and a DNS answer polled until it is the expected one (an edit
// applies after the reload its request made). Not a test file: vitest runs *.e2e.ts only.
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import { chromium, Browser, BrowserContext, Page } from 'playwright-core';
import axe from 'axe-core';
import { Daemon, FakeUpstream, UPSTREAM_A, query } from './harness';

const ROOT = path.resolve(__dirname, '../../..');
export const BIN = path.resolve(ROOT, process.env.NXDNS_BIN ?? 'build/nxdns');
export const ART = path.resolve(ROOT, process.env.NXDNS_UI_ARTIFACTS ?? 'build/ui-artifacts');
const CHROMIUM = process.env.NXDNS_CHROMIUM ?? '/usr/bin/chromium';
const PASSWORD = 'correct horse battery';
export const WIDTHS = { phone: { width: 390, height: 844 }, desktop: { width: 1280, height: 900 } };
export const BLOCK_A = '0.0.0.0';
export const UP_A = UPSTREAM_A.join('.');

export class Session {
  up!: FakeUpstream;
  nx!: Daemon;
  browser!: Browser;
  ctx!: BrowserContext;
  page!: Page;
  readonly problems: string[] = [];
  readonly foreign: string[] = [];

  /** `more`: config the daemon gets beyond the harness's (harness.ts DaemonOpts). */
  async start(blocked: string[], more: { extra?: string[]; admin?: string[] } = {}): Promise<void> {
    expect(fs.existsSync(BIN), `${BIN} (build it first)`).toBe(true);
    expect(fs.existsSync(CHROMIUM), `${CHROMIUM} (scripts/bootstrap installs Debian's chromium)`).toBe(true);
    fs.mkdirSync(ART, { recursive: true });
    this.up = await new FakeUpstream().start();
    this.nx = new Daemon(BIN, this.up.port, { blocked, ...more });
    await this.nx.start();
    this.browser = await chromium.launch({ executablePath: CHROMIUM, headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] });
    this.ctx = await this.browser.newContext({ viewport: WIDTHS.desktop });
    this.page = await this.ctx.newPage();
    this.page.on('request', (r) => {
      if (!r.url().startsWith(this.nx.base + '/') && !r.url().startsWith('data:')) this.foreign.push(r.url());
    });
    this.page.on('console', (m) => { if (m.type() === 'error') this.problems.push(`console: ${m.text()}`); });
    this.page.on('pageerror', (e) => this.problems.push(`page: ${e.message}`));
    // The first-start setup has its own test (dashboard.e2e.ts): here through the API, in the
    // browser context so the page shares the session cookie.
    const r = await this.ctx.request.post(`${this.nx.base}/api/auth/setup`,
      { data: { token: this.nx.setupToken(), password: PASSWORD } });
    expect(r.status(), await r.text()).toBe(200);
  }

  /** Stops everything; throws unless nxdns exited 0. */
  async stop(): Promise<void> {
    await this.browser?.close();
    const code = await this.nx?.stop();
    await this.up?.stop();
    if (this.nx && code !== 0) throw new Error(`nxdns exited ${code}:\n${this.nx.log()}`);
  }

  /** Opens a page through the navigation, as a person would, and waits for its heading. */
  async open(link: string, heading = link): Promise<void> {
    await this.page.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name: link, exact: true }).click();
    await expect.poll(() => this.page.getByRole('heading', { level: 1 }).innerText()).toBe(heading);
  }

  async shoot(name: string): Promise<void> {
    for (const [w, size] of Object.entries(WIDTHS)) {
      await this.page.setViewportSize(size);
      await this.page.waitForTimeout(150); // layout settles after the resize (nothing to poll)
      await this.page.screenshot({ path: path.join(ART, `${name}-${w}.png`), fullPage: true });
    }
    await this.page.setViewportSize(WIDTHS.desktop);
  }

  async axeCheck(label: string): Promise<void> {
    await this.page.evaluate(axe.source);
    for (const size of Object.values(WIDTHS)) {
      await this.page.setViewportSize(size);
      const r = await this.page.evaluate(() => (window as any).axe.run(document, { resultTypes: ['violations'] }));
      const bad = (r.violations as any[]).filter((v) => v.impact === 'serious' || v.impact === 'critical');
      expect(bad.map((v) => `${label} @${size.width}px: ${v.id}: ${v.help} (${v.nodes.map((n: any) => n.target).join(' ')})`)).toEqual([]);
    }
    await this.page.setViewportSize(WIDTHS.desktop);
  }

  /** The A answer for name over DNS, polled until it is `want` (a change applies after its reload). */
  async resolvesTo(name: string, want: string): Promise<void> {
    await expect.poll(async () => (await query(this.nx.dnsPort, name)).a.join(','), { timeout: 10_000, interval: 200 })
      .toBe(want);
  }

  config(): string {
    return fs.readFileSync(path.join(this.nx.dir, 'nxdns.yaml'), 'utf8');
  }

  /** The error shown at the field with this input id. */
  fieldError(id: string) {
    return this.page.locator(`#${id}-err`);
  }

  async focusedId(): Promise<string | undefined> {
    return this.page.evaluate(() => document.activeElement?.id);
  }
}
