// Replication in a real browser against real daemons (issue 17). A replica: the daemon under
// test follows a primary on a loopback port nothing listens on, so its pulls fail for real;
// every page shows the banner naming the primary, the failed result and its error; Sync now
// starts a pull (the server's pull count rises); an edit of a synced key (a rule, a source, a
// synced setting) is refused 409 synced_from_primary, the server's words shown at the form and
// the file unchanged. A primary: a second daemon with a read token; a pull of its export with
// that token makes the Settings page list the replica. Screenshots at both widths, axe clean.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from './harness';
import { Session } from './session';

const TOKEN = 'nxdns_ui-e2e-replica-token-0123456789abcdefghijkl';

describe('a replica', () => {
  const s = new Session();
  const page = () => s.page;
  const bannerEl = () => page().getByTestId('sync-banner');
  let primary = '';

  beforeAll(async () => {
    // a port taken and released: nothing listens there, so each pull fails at connect
    primary = `https://127.0.0.1:${await freePort()}`;
    await s.start(['ads.e2e.test'], {
      extra: ['sync:', `  primary: "${primary}"`, `  token: "${TOKEN}"`, '  interval: 1h'],
    });
    await page().goto(s.nx.base + '/');
    await page().getByRole('heading', { level: 1, name: 'Dashboard' }).waitFor();
  });

  afterAll(async () => {
    await s.stop();
  });

  it('shows the banner on every page: the primary, the last result, its error', async () => {
    await expect.poll(() => bannerEl().innerText()).toContain(`This server is a replica of ${primary}.`);
    // the pull at start fails: the status says so and the banner words it with the error
    await expect.poll(async () => (await (await s.ctx.request.get(`${s.nx.base}/api/sync/status`)).json()).result,
      { timeout: 20_000 }).toBe('fetch_failed');
    const st = await (await s.ctx.request.get(`${s.nx.base}/api/sync/status`)).json();
    expect(st.error).toBeTruthy();
    await page().reload();
    await expect.poll(() => bannerEl().innerText()).toContain('the primary could not be reached');
    expect(await bannerEl().innerText()).toContain(`Error: ${st.error}`);
    await s.shoot('replica-banner');
    await s.axeCheck('replica banner');
    for (const [link, heading] of [['Lists', 'Lists'], ['Rules', 'Rules'], ['Settings', 'Settings']]) {
      await s.open(link, heading);
      expect(await bannerEl().innerText()).toContain(primary);
    }
  });

  it('Sync now starts a pull', async () => {
    const before = (await (await s.ctx.request.get(`${s.nx.base}/api/sync/status`)).json()).pulls as number;
    await page().getByRole('button', { name: 'Sync now' }).click();
    await expect.poll(async () => (await (await s.ctx.request.get(`${s.nx.base}/api/sync/status`)).json()).pulls,
      { timeout: 20_000 }).toBeGreaterThan(before);
    // the banner reads the new attempt back and nothing on the page went wrong
    await expect.poll(() => bannerEl().innerText()).toContain('the primary could not be reached');
    expect(await bannerEl().getByRole('alert').count()).toBe(0);
  });

  it('an edit of a synced key is refused in the server\'s words, and nothing is written', async () => {
    const file = s.config();
    await s.open('Rules');
    await page().getByLabel('Rule', { exact: true }).fill('local.e2e.test');
    await page().getByRole('button', { name: 'Add rule' }).click();
    const refused = new RegExp(`follows the primary ${primary.replace(/[.:/]/g, '\\$&')} \\(sync\\.primary\\): change it there`);
    await expect.poll(() => page().locator('form p.error[role="alert"]').innerText()).toMatch(refused);

    await s.open('Lists');
    await page().getByLabel('Name', { exact: true }).first().fill('more');
    await page().getByLabel('Download from a URL').check();
    await page().getByLabel('URL', { exact: true }).fill('http://127.0.0.1:1/list.txt');
    await page().getByRole('button', { name: 'Add source' }).click();
    await expect.poll(() => page().locator('.source-form p.error[role="alert"]').innerText()).toMatch(refused);

    // a synced setting on the Settings page: the refusal at that section's form
    await s.open('Settings');
    const ttl = page().locator('#set-filter-block_ttl');
    await ttl.fill('55');
    await page().getByRole('button', { name: 'Save Blocking' }).click();
    await expect.poll(() => page().locator('[data-section="filter"] p.error[role="alert"]').innerText()).toMatch(refused);
    await s.shoot('replica-refused');
    await s.axeCheck('replica refused');
    expect(s.config()).toBe(file);
    // a replica lists no replicas of its own
    expect(await page().locator('[data-section="replicas"]').count()).toBe(0);
    expect(s.problems.filter((p) => !/409/.test(p))).toEqual([]);
    expect(s.foreign).toEqual([]);
  });
});

describe('a primary', () => {
  const s = new Session();
  const page = () => s.page;

  beforeAll(async () => {
    const hash = createHash('sha256').update(TOKEN).digest('hex');
    await s.start(['ads.e2e.test'], {
      admin: ['tokens:', `    - {name: kitchen-pi, hash: "${hash}", created: 1, scope: read}`],
    });
    await page().goto(s.nx.base + '/');
    await page().getByRole('heading', { level: 1, name: 'Dashboard' }).waitFor();
  });

  afterAll(async () => {
    await s.stop();
  });

  it('has no banner, and its Settings page lists the replica that pulled', async () => {
    expect(await page().getByTestId('sync-banner').count()).toBe(0);
    await s.open('Settings');
    await expect.poll(() => page().locator('[data-section="replicas"]').innerText()).toContain('No replica has pulled');
    // what a replica does: GET the export with its read token
    const r = await fetch(`${s.nx.base}/api/sync/export`, { headers: { Authorization: `Bearer ${TOKEN}` } });
    expect(r.status).toBe(200);
    await r.arrayBuffer();
    await page().reload();
    await s.open('Settings');
    await expect.poll(() => page().getByTestId('replicas').innerText())
      .toMatch(/^kitchen-pi from 127\.0\.0\.1: (just now|\d+ s ago), took a new configuration \(generation [0-9a-f]+\), 1 pull$/);
    await s.shoot('primary-replicas');
    await s.axeCheck('primary replicas');
    expect(await page().getByTestId('sync-banner').count()).toBe(0);
    expect(s.problems).toEqual([]);
  });
});
