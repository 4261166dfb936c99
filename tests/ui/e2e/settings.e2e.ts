// Pause and the Settings page in a real browser against the real daemon. Pause: a blocked name
// resolves over DNS while filtering is paused (the control under the top bar, on every page,
// counting down) and is blocked again after resume. Settings, drawn from GET /api/schema: a bad
// upstream address is refused at its field and the file keeps the old value; a restart-only
// change (cache.size) says it waits for a restart; block mode custom with a block address
// answers that address over DNS. Screenshots at both widths, axe-core clean.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BLOCK_A, Session, UP_A } from './session';

const BLOCKED = ['ads.e2e.test', 'tracker.e2e.test'];
const s = new Session();
const page = () => s.page;
const pauseState = () => page().getByTestId('pause-state');

beforeAll(async () => {
  await s.start(BLOCKED);
  await page().goto(s.nx.base + '/');
  await page().getByRole('heading', { level: 1, name: 'Dashboard' }).waitFor();
});

afterAll(async () => {
  await s.stop();
});

describe('pause', () => {
  it('pause and resume filtering', async () => {
    await s.resolvesTo('ads.e2e.test', BLOCK_A);
    await expect.poll(() => pauseState().innerText()).toBe('Filtering is on');
    await page().getByRole('button', { name: 'Pause filtering…' }).click();
    expect(await page().getByRole('button', { name: 'Pause filtering…' }).getAttribute('aria-expanded')).toBe('true');
    await page().getByRole('button', { name: 'Pause filtering for 5 min' }).click();
    await expect.poll(() => pauseState().innerText()).toMatch(/^Filtering is paused: (5:00|4:5\d) left$/);
    await expect.poll(() => s.focusedId()).toBe('pause-main'); // the resume button took the focus
    await s.resolvesTo('ads.e2e.test', UP_A);
    await s.resolvesTo('tracker.e2e.test', UP_A);
    // the server holds the pause: it agrees with the page
    const st = await (await s.ctx.request.get(`${s.nx.base}/api/filter/pause`)).json();
    expect(st.paused).toBe(true);
    expect(st.until_ms - Date.now()).toBeGreaterThan(240_000); // minus the steps since, on a loaded box
    expect(st.until_ms - Date.now()).toBeLessThanOrEqual(300_000);
    // it counts down
    const first = await pauseState().innerText();
    await expect.poll(() => pauseState().innerText(), { timeout: 5_000 }).not.toBe(first);
    await s.shoot('paused');
    await s.axeCheck('paused');

    // visible from every signed-in page
    await s.open('Rules');
    expect(await pauseState().innerText()).toMatch(/^Filtering is paused: /);

    await page().getByRole('button', { name: 'Resume filtering' }).click();
    await expect.poll(() => pauseState().innerText()).toBe('Filtering is on');
    await s.resolvesTo('ads.e2e.test', BLOCK_A);
    expect((await (await s.ctx.request.get(`${s.nx.base}/api/filter/pause`)).json()).paused).toBe(false);
  });

  it('pauses until resumed, and a reload still shows it', async () => {
    await page().getByRole('button', { name: 'Pause filtering…' }).click();
    await page().getByRole('button', { name: 'Pause filtering until resumed' }).click();
    await expect.poll(() => pauseState().innerText()).toBe('Filtering is paused: until resumed');
    await s.resolvesTo('tracker.e2e.test', UP_A);
    // a pause with no end, not a long one: the server says so
    const st = await (await s.ctx.request.get(`${s.nx.base}/api/filter/pause`)).json();
    expect([st.paused, st.until_resumed, st.until_ms]).toEqual([true, true, null]);
    await page().reload();
    await expect.poll(() => pauseState().innerText()).toBe('Filtering is paused: until resumed');
    await s.shoot('paused-until-resumed');
    await s.axeCheck('paused until resumed');
    await page().getByRole('button', { name: 'Resume filtering' }).click();
    await expect.poll(() => pauseState().innerText()).toBe('Filtering is on');
    await s.resolvesTo('tracker.e2e.test', BLOCK_A);
  });
});

describe('settings page', () => {
  const field = (key: string) => page().locator(`#set-${key.replace(/\./g, '-')}`);

  it('is drawn from the schema: every editable key the API serves has its field', async () => {
    await s.open('Settings');
    await field('upstream.servers').waitFor();
    const schema = await (await s.ctx.request.get(`${s.nx.base}/api/schema`)).json();
    const drawable = ['bool', 'uint', 'string', 'addr', 'addr_list', 'cidr_list', 'upstreams', 'strings', 'block_addrs'];
    const editable = (schema.keys as any[]).filter((k) => k.editable && drawable.includes(k.kind)).map((k) => k.path);
    expect(editable.length).toBeGreaterThan(5);
    const shown = await page().locator('.setting').evaluateAll((els) => els.map((e) => e.getAttribute('data-key')));
    // every one, once; sections in reading order (settings.ts), keys within one in the schema's
    expect([...shown].sort()).toEqual([...editable].sort());
    const part = (k: string | null) => (k ?? '').split('.')[0];
    for (const p of new Set(editable.map(part))) {
      expect(shown.filter((k) => part(k) === p), p).toEqual(editable.filter((k: string) => part(k) === p));
    }
    // nothing the API refuses to edit is offered
    expect(shown).not.toContain('admin.password_hash');
    expect(await field('upstream.servers').inputValue()).toBe(`127.0.0.1:${s.up.port}`);
    expect(await field('filter.block_mode').inputValue()).toBe('null');
    await s.shoot('settings');
    await s.axeCheck('settings');
  });

  it('a validation error shown at the field for a bad upstream address', async () => {
    const before = s.config();
    await field('upstream.servers').fill(`127.0.0.1:${s.up.port}\n300.1.2.3`);
    await page().getByRole('button', { name: 'Save Upstream servers' }).click();
    await expect.poll(() => s.fieldError('set-upstream-servers').innerText())
      .toContain("Entry 2: bad address '300.1.2.3'");
    expect(await field('upstream.servers').getAttribute('aria-invalid')).toBe('true');
    await expect.poll(() => s.focusedId()).toBe('set-upstream-servers');
    expect(s.config()).toBe(before);
    await s.shoot('settings-error');
    await s.axeCheck('settings with a field error');
    // the resolver still uses the old upstream
    await s.resolvesTo('fine.e2e.test', UP_A);

    await field('upstream.servers').fill(`127.0.0.1:${s.up.port}`);
    await page().getByRole('button', { name: 'Save Upstream servers' }).click();
    await expect.poll(() => page().getByTestId('note-upstream').innerText()).toBe('Nothing changed.');
    expect(await s.fieldError('set-upstream-servers').count()).toBe(0);
  });

  it('a setting that needs a restart says so', async () => {
    await field('cache.size').fill('500');
    await page().getByRole('button', { name: 'Save Cache' }).click();
    await expect.poll(() => page().getByTestId('note-cache').innerText())
      .toBe('Saved. cache.size takes effect only after nxdns is restarted; until then the old value stays in use.');
    expect(s.config()).toMatch(/size: 500/);
    expect(await page().locator('.setting[data-key="cache.size"]').innerText()).toContain('Applies after a restart of nxdns.');
    await s.shoot('settings-restart');

    // a live one says it is in effect
    await field('logging.retention_days').fill('3');
    await page().getByRole('button', { name: 'Save Query log and privacy' }).click();
    await expect.poll(() => page().getByTestId('note-logging').innerText()).toBe('Saved: in effect now.');
    expect(await page().getByTestId('note-cache').count()).toBe(0);
    const r = await (await s.ctx.request.get(`${s.nx.base}/api/settings`)).json();
    expect(r.settings['logging.retention_days']).toBe(3);
  });

  it('sets block mode custom with its address: blocked names answer it over DNS', async () => {
    await field('filter.block_mode').selectOption('custom');
    await page().getByRole('button', { name: 'Save Blocking' }).click();
    await expect.poll(() => s.fieldError('set-filter-block_mode').innerText()).toContain('custom needs filter.block_addresses');
    await s.resolvesTo('ads.e2e.test', BLOCK_A);

    await field('filter.block_addresses').fill('192.0.2.99');
    await page().getByRole('button', { name: 'Save Blocking' }).click();
    await expect.poll(() => page().getByTestId('note-filter').innerText()).toBe('Saved: in effect now.');
    expect(await s.fieldError('set-filter-block_mode').count()).toBe(0);
    await s.resolvesTo('ads.e2e.test', '192.0.2.99');
    // what the page shows after a reload is what the server keeps
    await page().reload();
    await expect.poll(() => field('filter.block_mode').inputValue()).toBe('custom');
    expect(await field('filter.block_addresses').inputValue()).toBe('192.0.2.99');
  });

  it('reads in sections a person knows, and admin HTTPS is a setting that waits for a restart', async () => {
    const headings = await page().locator('main section h2').allInnerTexts();
    expect(headings.slice(0, 4)).toEqual(['Upstream servers', 'Blocking', 'Special-use names', 'Cache']);
    expect(headings).toEqual(expect.arrayContaining(['Access', 'TLS', 'Web admin', 'Replicas']));
    expect(await page().locator('[data-section="access"]').innerText()).toContain('Rate limit: queries per second');
    const tls = page().locator('[data-section="admin"]').getByLabel('TLS', { exact: true });
    expect(await tls.isChecked()).toBe(false);
    expect(await page().locator('.setting[data-key="admin.tls"]').innerText()).toContain('Applies after a restart of nxdns.');
    await tls.check();
    await page().getByRole('button', { name: 'Save Web admin' }).click();
    await expect.poll(() => page().getByTestId('note-admin').innerText())
      .toBe('Saved. admin.tls takes effect only after nxdns is restarted; until then the old value stays in use.');
    expect(s.config()).toMatch(/tls: true/);
    // still plain HTTP until the restart: this page keeps working
    expect((await s.ctx.request.get(`${s.nx.base}/api/settings`)).status()).toBe(200);
    await s.shoot('settings-sections');
    await s.axeCheck('settings sections');
  });

  it('made no request to another host and logged no error but the refusals', () => {
    expect(s.foreign).toEqual([]);
    expect(s.problems.filter((p) => !/status of 400/.test(p))).toEqual([]);
  });
});
