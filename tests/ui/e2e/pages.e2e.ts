// The edit pages in a real browser against the real daemon: rules, groups, clients and local
// records are added, edited and removed through their forms, and each change is checked where
// it matters, over DNS from this test (a deny rule blocks, a client in an unfiltered group is
// not filtered, a local record answers) and in the config file. Bad input shows the server's
// message at its field. The navigation reaches every page at phone width, by keyboard, with a
// visible focus. Screenshots at phone and desktop width; axe-core finds nothing serious.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BLOCK_A, Session, UP_A } from './session';

const BLOCKED = ['ads.e2e.test', 'tracker.e2e.test'];
const s = new Session();
const page = () => s.page;

beforeAll(async () => {
  await s.start(BLOCKED);
  await page().goto(s.nx.base + '/');
  await page().getByRole('heading', { level: 1, name: 'Dashboard' }).waitFor();
});

afterAll(async () => {
  await s.stop();
});

// the value as a CSS string: a regex rule holds backslashes
const item = (attr: string, v: string) =>
  page().locator(`li.item[${attr}="${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"]`);
const status = (text: string) => page().getByRole('status').filter({ hasText: text });

describe('navigation', () => {
  it('reaches every page by keyboard at phone width, with a visible focus', async () => {
    await page().setViewportSize({ width: 390, height: 844 });
    const nav = page().getByRole('navigation', { name: 'Pages' });
    const links = await nav.getByRole('link').allInnerTexts();
    expect(links).toEqual(['Dashboard', 'Query log', 'Lists', 'Rules', 'Groups', 'Clients', 'Local records', 'Settings', 'Security']);
    // every link is inside the phone's width (the bar wraps, nothing scrolls off)
    for (const box of await nav.getByRole('link').evaluateAll((els) => els.map((e) => e.getBoundingClientRect().right))) {
      expect(box).toBeLessThanOrEqual(390);
    }
    for (const [name, heading] of [['Rules', 'Rules'], ['Groups', 'Groups'], ['Clients', 'Clients'],
      ['Local records', 'Local records'], ['Settings', 'Settings'], ['Security', 'Security'],
      ['Dashboard', 'Dashboard']]) {
      await nav.getByRole('link', { name, exact: true }).focus();
      await page().keyboard.press('Enter');
      await expect.poll(() => page().getByRole('heading', { level: 1 }).innerText()).toBe(heading);
      expect(await nav.getByRole('link', { name, exact: true }).getAttribute('aria-current')).toBe('page');
    }
    // Tab from the skip link lands on the first nav link, drawn with the focus outline
    await page().reload();
    await page().getByRole('heading', { level: 1, name: 'Dashboard' }).waitFor();
    await page().keyboard.press('Tab');
    expect(await page().evaluate(() => document.activeElement?.textContent)).toBe('Skip to content');
    await page().keyboard.press('Tab');
    const focus = await page().evaluate(() => {
      const el = document.activeElement as HTMLElement;
      const cs = getComputedStyle(el);
      return { text: el.textContent, outline: cs.outlineStyle, width: parseFloat(cs.outlineWidth) };
    });
    expect(focus).toEqual({ text: 'Dashboard', outline: 'solid', width: 3 });
    await page().setViewportSize({ width: 1280, height: 900 });
  });
});

describe('rules page', () => {
  it('adds a deny rule that blocks over DNS, and refuses a bad rule at the field', async () => {
    await s.open('Rules');
    await expect.poll(() => page().title()).toBe('Rules · nxdns');
    await s.resolvesTo('ruled.e2e.test', UP_A);
    await page().getByLabel('Rule', { exact: true }).fill('bad..name');
    await page().getByRole('button', { name: 'Add rule' }).click();
    await expect.poll(() => s.fieldError('rule-text').innerText()).toContain("'bad..name': not a name");
    expect(await page().locator('#rule-text').getAttribute('aria-invalid')).toBe('true');
    await expect.poll(() => s.focusedId()).toBe('rule-text');
    await s.shoot('rules-error');
    await s.axeCheck('rules with a field error');
    expect(s.config()).not.toContain('bad..name');

    await page().getByLabel('Rule', { exact: true }).fill('Ruled.e2e.test');
    await page().getByRole('button', { name: 'Add rule' }).click();
    await expect.poll(() => status('Added').innerText()).toBe('Added: Ruled.e2e.test is always blocked.');
    await expect.poll(() => item('data-rule', 'ruled.e2e.test').count()).toBe(1);
    expect(await s.fieldError('rule-text').count()).toBe(0);
    await s.resolvesTo('ruled.e2e.test', BLOCK_A);
  });

  it('adds an allow rule that unblocks a listed name', async () => {
    await s.resolvesTo('ads.e2e.test', BLOCK_A);
    await page().getByLabel('Kind').selectOption('allow');
    await page().getByLabel('Rule', { exact: true }).fill('ads.e2e.test');
    await page().getByRole('button', { name: 'Add rule' }).click();
    await expect.poll(() => item('data-rule', 'ads.e2e.test').getAttribute('data-list')).toBe('allow');
    await s.resolvesTo('ads.e2e.test', UP_A);
    await s.shoot('rules');
    await s.axeCheck('rules');
  });

  it('edits a rule into a wildcard: the subdomains are blocked, the name itself no longer', async () => {
    await item('data-rule', 'ruled.e2e.test').getByRole('button', { name: 'Edit deny rule ruled.e2e.test' }).click();
    await expect.poll(() => page().getByLabel('Rule', { exact: true }).inputValue()).toBe('ruled.e2e.test');
    await expect.poll(() => s.focusedId()).toBe('rule-text');
    // a refused new rule keeps the old one (one request: nothing was removed first)
    await page().getByLabel('Rule', { exact: true }).fill('bad..name');
    await page().getByRole('button', { name: 'Save rule' }).click();
    await expect.poll(() => s.fieldError('rule-text').innerText()).toContain("'bad..name': not a name");
    expect(await item('data-rule', 'ruled.e2e.test').count()).toBe(1);
    await s.resolvesTo('ruled.e2e.test', BLOCK_A);
    const calls: string[] = [];
    const onReq = (r: { method(): string; url(): string }) => {
      if (r.url().includes('/api/filter/rules')) calls.push(r.method());
    };
    page().on('request', onReq);
    await page().getByLabel('Rule', { exact: true }).fill('*.ruled.e2e.test');
    await page().getByRole('button', { name: 'Save rule' }).click();
    await expect.poll(() => item('data-rule', '*.ruled.e2e.test').count()).toBe(1);
    page().off('request', onReq);
    expect(calls).toEqual(['PUT']);
    expect(await item('data-rule', 'ruled.e2e.test').count()).toBe(0);
    expect(await item('data-rule', '*.ruled.e2e.test').innerText()).toContain('every name below ruled.e2e.test');
    await s.resolvesTo('x.ruled.e2e.test', BLOCK_A);
    await s.resolvesTo('ruled.e2e.test', UP_A);
  });

  it('removes rules after a confirmation', async () => {
    await item('data-rule', '*.ruled.e2e.test').getByRole('button', { name: 'Remove deny rule *.ruled.e2e.test' }).click();
    await page().getByRole('button', { name: 'Confirm: remove deny rule *.ruled.e2e.test' }).click();
    await expect.poll(() => item('data-rule', '*.ruled.e2e.test').count()).toBe(0);
    await expect.poll(() => s.focusedId()).toBe('rules-h');
    await s.resolvesTo('x.ruled.e2e.test', UP_A);
    await item('data-rule', 'ads.e2e.test').getByRole('button', { name: 'Remove allow rule ads.e2e.test' }).click();
    await page().getByRole('button', { name: 'Confirm: remove allow rule ads.e2e.test' }).click();
    await expect.poll(() => page().getByText('No rules yet').count()).toBe(1);
    await s.resolvesTo('ads.e2e.test', BLOCK_A);
    expect(s.config()).not.toContain('ruled.e2e.test');
  });

  it('adds and removes a regex rule (its "/" travel url-encoded in the delete path)', async () => {
    const re = '/^re[0-9]+\\.e2e\\.test$/';
    await page().getByLabel('Kind').selectOption('deny');
    await page().getByLabel('Rule', { exact: true }).fill(re);
    await page().getByRole('button', { name: 'Add rule' }).click();
    await expect.poll(() => item('data-rule', re).count()).toBe(1);
    expect(await item('data-rule', re).innerText()).toContain('names matching the regular expression');
    await s.resolvesTo('re42.e2e.test', BLOCK_A);
    await s.resolvesTo('rex.e2e.test', UP_A);
    await item('data-rule', re).getByRole('button', { name: `Remove deny rule ${re}` }).click();
    await page().getByRole('button', { name: `Confirm: remove deny rule ${re}` }).click();
    await expect.poll(() => page().getByText('No rules yet').count()).toBe(1);
    await s.resolvesTo('re42.e2e.test', UP_A);
  });
});

describe('groups and clients pages', () => {
  it('adds a group with a list, unfiltered; a bad name is refused at the field', async () => {
    await s.open('Groups');
    await expect.poll(() => item('data-group', 'default').count()).toBe(1);
    expect(await item('data-group', 'default').getByRole('button', { name: 'Remove default' }).count()).toBe(0);
    await page().getByLabel('Name', { exact: true }).fill('Bad Name');
    await page().getByRole('button', { name: 'Add group' }).click();
    await expect.poll(() => s.fieldError('group-name').innerText()).toContain("'Bad Name' is not a valid group name");
    await expect.poll(() => s.focusedId()).toBe('group-name');
    await s.shoot('groups-error');
    await s.axeCheck('groups with a field error');

    await page().getByLabel('Name', { exact: true }).fill('guests');
    await page().getByRole('group', { name: 'Lists' }).getByLabel('e2e').check();
    await page().getByLabel("Filter this group's clients").uncheck();
    await page().getByRole('button', { name: 'Add group' }).click();
    await expect.poll(() => item('data-group', 'guests').innerText()).toContain('Not filtered · lists: e2e');
    expect(s.config()).toMatch(/guests/);
  });

  it('edits a group', async () => {
    await item('data-group', 'guests').getByRole('button', { name: 'Edit guests' }).click();
    await expect.poll(() => page().getByRole('heading', { name: 'Edit “guests”' }).count()).toBe(1);
    expect(await page().getByRole('group', { name: 'Lists' }).getByLabel('e2e').isChecked()).toBe(true);
    await page().getByRole('group', { name: 'Lists' }).getByLabel('e2e').uncheck();
    await page().getByRole('button', { name: 'Save group' }).click();
    await expect.poll(() => status('Saved').innerText()).toBe('Saved the group “guests”.');
    expect(await item('data-group', 'guests').innerText()).toContain('Not filtered · lists: none');
    await s.shoot('groups');
    await s.axeCheck('groups');
  });

  it('adds a client in that group: its queries are no longer filtered; host bits are refused at the field', async () => {
    await s.open('Clients');
    await expect.poll(() => page().getByText('No clients yet').count()).toBe(1);
    await page().getByLabel('Name', { exact: true }).fill('laptop');
    await page().getByLabel('Addresses').fill('10.0.0.1/8');
    await page().getByRole('group', { name: 'Groups' }).getByLabel('guests').check();
    await page().getByRole('button', { name: 'Add client' }).click();
    await expect.poll(() => s.fieldError('client-ids').innerText()).toContain("Entry 1: bad address '10.0.0.1/8': host bits are set");
    await expect.poll(() => s.focusedId()).toBe('client-ids');
    await s.shoot('clients-error');
    await s.axeCheck('clients with a field error');
    await s.resolvesTo('tracker.e2e.test', BLOCK_A);

    await page().getByLabel('Addresses').fill('192.0.2.77\n127.0.0.1');
    await page().getByRole('button', { name: 'Add client' }).click();
    await expect.poll(() => item('data-client', 'laptop').innerText()).toContain('192.0.2.77, 127.0.0.1 · groups: guests');
    await s.resolvesTo('tracker.e2e.test', UP_A); // the test's queries come from 127.0.0.1
    await s.shoot('clients');
    await s.axeCheck('clients');
  });

  it('edits the client out of the group (filtered again), then removes it', async () => {
    await item('data-client', 'laptop').getByRole('button', { name: 'Edit laptop' }).click();
    await expect.poll(() => page().getByLabel('Addresses').inputValue()).toBe('192.0.2.77\n127.0.0.1');
    await page().getByRole('group', { name: 'Groups' }).getByLabel('guests').uncheck();
    await page().getByRole('button', { name: 'Save client' }).click();
    await expect.poll(() => item('data-client', 'laptop').innerText()).toContain('groups: default');
    await s.resolvesTo('tracker.e2e.test', BLOCK_A);

    // the group is in use by name nowhere now: it can go too
    await item('data-client', 'laptop').getByRole('button', { name: 'Remove laptop' }).click();
    await page().getByRole('button', { name: 'Confirm: remove laptop' }).click();
    await expect.poll(() => item('data-client', 'laptop').count()).toBe(0);
    await s.open('Groups');
    await item('data-group', 'guests').getByRole('button', { name: 'Remove guests' }).click();
    await page().getByRole('button', { name: 'Confirm: remove guests' }).click();
    await expect.poll(() => item('data-group', 'guests').count()).toBe(0);
    expect(s.config()).not.toMatch(/guests|laptop/);
  });
});

describe('local records page', () => {
  it('adds a record that answers over DNS; a bad address is refused at the field', async () => {
    await s.open('Local records');
    await s.resolvesTo('nas.e2e.test', UP_A);
    await page().getByLabel('Name', { exact: true }).fill('nas.e2e.test');
    await page().getByLabel('Type').selectOption('A');
    await page().getByLabel('Value').fill('192.168.7.');
    await page().getByRole('button', { name: 'Add record' }).click();
    await expect.poll(() => s.fieldError('local-value').innerText()).toBe("'192.168.7.' is not an IPv4 address (type A)");
    await expect.poll(() => s.focusedId()).toBe('local-value');
    await page().getByLabel('Value').fill('192.168.7.7');
    await page().getByLabel('TTL (seconds, optional)').fill('soon');
    await page().getByRole('button', { name: 'Add record' }).click();
    await expect.poll(() => s.fieldError('local-ttl').innerText()).toContain('ttl');
    expect(await s.fieldError('local-value').count()).toBe(0);
    await s.shoot('local-error');
    await s.axeCheck('local records with a field error');

    await page().getByLabel('TTL (seconds, optional)').fill('120');
    await page().getByRole('button', { name: 'Add record' }).click();
    await expect.poll(() => item('data-record', 'nas.e2e.test').innerText()).toContain('A 192.168.7.7 · TTL 120 s');
    await s.resolvesTo('nas.e2e.test', '192.168.7.7');
  });

  it('edits a record (the new value answers, the old one is gone), then removes it', async () => {
    await item('data-record', 'nas.e2e.test').getByRole('button', { name: 'Edit A record of nas.e2e.test' }).click();
    await expect.poll(() => page().getByLabel('Value').inputValue()).toBe('192.168.7.7');
    // a refused new value keeps the old record, answering over DNS as before
    await page().getByLabel('Value').fill('192.168.7.999');
    await page().getByRole('button', { name: 'Save record' }).click();
    await expect.poll(() => s.fieldError('local-value').count()).toBe(1);
    expect(await item('data-record', 'nas.e2e.test').innerText()).toContain('192.168.7.7');
    await s.resolvesTo('nas.e2e.test', '192.168.7.7');
    // one request changes it
    const calls: string[] = [];
    const onReq = (r: { method(): string; url(): string }) => {
      if (r.url().includes('/api/local-records')) calls.push(r.method());
    };
    page().on('request', onReq);
    await page().getByLabel('Value').fill('192.168.7.8');
    await page().getByRole('button', { name: 'Save record' }).click();
    await expect.poll(() => status('Saved').innerText()).toBe('Saved the A record of nas.e2e.test.');
    page().off('request', onReq);
    expect(calls).toEqual(['PUT']);
    expect(await item('data-record', 'nas.e2e.test').count()).toBe(1);
    expect(await item('data-record', 'nas.e2e.test').innerText()).toContain('192.168.7.8');
    await s.resolvesTo('nas.e2e.test', '192.168.7.8');
    await s.shoot('local');
    await s.axeCheck('local records');

    await item('data-record', 'nas.e2e.test').getByRole('button', { name: 'Remove A record of nas.e2e.test' }).click();
    await page().getByRole('button', { name: 'Confirm: remove A record of nas.e2e.test' }).click();
    await expect.poll(() => page().getByText('No local records yet').count()).toBe(1);
    await s.resolvesTo('nas.e2e.test', UP_A);
  });

});

describe('client names', () => {
  // Today's server sends no client_name; a newer one adds it to query rows and top clients.
  // Both shapes must read well: the real answers first, then the same answers with a name
  // added on the way (page.route), as the newer server will send them.
  const withName = (o: any) => ({ ...o, client_name: o.client === '127.0.0.1' || o.key === '127.0.0.1' ? 'laptop' : null });

  it('shows the address alone without a name, and the name beside the address with one', async () => {
    await s.open('Dashboard');
    const top = page().getByTestId('top-clients');
    await expect.poll(() => top.innerText(), { timeout: 15_000 }).toMatch(/^127\.0\.0\.1\s/);
    await s.open('Query log');
    const meta = page().getByTestId('query-row').first().locator('.qmeta');
    await expect.poll(() => meta.innerText(), { timeout: 15_000 }).toContain(' · 127.0.0.1 · ');

    const rewrite = (key: 'items') => async (route: any) => {
      const r = await route.fetch();
      const body = await r.json();
      body[key] = body[key].map(withName);
      await route.fulfill({ response: r, json: body });
    };
    await page().route(/\/api\/stats\/top\?kind=clients/, rewrite('items'));
    await page().route(/\/api\/queries\?/, rewrite('items'));
    await page().reload();
    await expect.poll(() => meta.innerText(), { timeout: 15_000 }).toContain(' · laptop (127.0.0.1) · ');
    await s.open('Dashboard');
    await expect.poll(() => top.innerText()).toMatch(/^laptop 127\.0\.0\.1\s/);
    await page().unroute(/\/api\/stats\/top\?kind=clients/);
    await page().unroute(/\/api\/queries\?/);
  });

  it('made no request to another host and logged no error but the refusals', () => {
    expect(s.foreign).toEqual([]);
    expect(s.problems.filter((p) => !/status of 400/.test(p))).toEqual([]);
  });
});
