import { describe, expect, it } from 'vitest';
import {
  Filter, LIVE_MAX, QueryRow, explain, localTimeMs, matches, parseLive, pushLive, queriesUrl,
  buttonText, changeFor, changeText, invert, statusWord, timeOfDay,
} from '../../../ui/src/querylog';

const NONE: Filter = { client: '', name: '', status: 'all', proto: '', from: 0, to: 0 };

function row(o: Partial<QueryRow> = {}): QueryRow {
  return {
    ts: 1_700_000_000_000, client: '192.168.1.20', proto: 'udp', qtype: 'A', rcode: 'NOERROR',
    action: 'none', reason: 'none', name: 'example.org', matched: '', source: '', answer: '',
    upstream: '9.9.9.9:53', cached: false, duration_us: 1200, client_id: '', ...o,
  };
}

describe('queriesUrl', () => {
  it('sends only the fields set, trimmed, the name in lower case', () => {
    expect(queriesUrl(NONE, null)).toBe('/api/queries?limit=50');
    const u = new URL(queriesUrl({ client: ' 10.0.0.2 ', name: ' Ads.Example ', status: 'blocked',
      proto: 'doh', from: 1000, to: 2000 }, '1699.42', 10), 'http://x');
    expect(u.pathname).toBe('/api/queries');
    expect(Object.fromEntries(u.searchParams)).toEqual({
      client: '10.0.0.2', name: 'ads.example', status: 'blocked', proto: 'doh', from: '1000', to: '2000',
      cursor: '1699.42', limit: '10',
    });
  });
  it('leaves status all out and url-encodes what needs it', () => {
    const q = queriesUrl({ ...NONE, status: 'all', name: 'a&b=c' }, null);
    expect(q).not.toContain('status');
    expect(new URL(q, 'http://x').searchParams.get('name')).toBe('a&b=c');
  });
});

describe('localTimeMs', () => {
  it('reads a datetime-local value in local time, 0 when empty or bad', () => {
    expect(localTimeMs('')).toBe(0);
    expect(localTimeMs('not a date')).toBe(0);
    expect(localTimeMs('2026-12-01T10:30')).toBe(new Date(2026, 11, 1, 10, 30).getTime());
  });
});

describe('explain', () => {
  it('names the list and the matched name of a block', () => {
    expect(explain(row({ action: 'block', reason: 'blocklist_domain', name: 'ads.example.org',
      matched: 'ads.example.org', source: 'stevenblack' })))
      .toBe('Blocked: ads.example.org is on the list “stevenblack”.');
    expect(explain(row({ action: 'block', reason: 'blocklist_domain', name: 'x.ads.example.org',
      matched: 'ads.example.org', source: 'oisd' })))
      .toBe('Blocked: ads.example.org (a parent of this name) is on the list “oisd”.');
    expect(explain(row({ action: 'block', reason: 'blocklist_wildcard', name: 'a.track.net',
      matched: 'track.net', source: 'oisd' })))
      .toBe('Blocked: the list “oisd” blocks track.net and every name below it.');
  });
  it('names the user rule, exceptions, local records, pause', () => {
    expect(explain(row({ action: 'block', reason: 'user_deny', source: '*.tiktok.com' })))
      .toBe('Blocked by your rule “*.tiktok.com”.');
    expect(explain(row({ action: 'allow', reason: 'user_allow', source: 'ok.example' })))
      .toBe('Allowed by your rule “ok.example”.');
    expect(explain(row({ action: 'allow', reason: 'blocklist_exception', matched: 'cdn.x', source: 'l' })))
      .toBe('Allowed: the list “l” makes an exception for cdn.x.');
    expect(explain(row({ action: 'local', reason: 'local_record' }))).toBe('Answered from a local record.');
    expect(explain(row({ reason: 'paused' }))).toMatch(/^Filtering was paused/);
  });
  it('says how an unmatched name was answered', () => {
    expect(explain(row())).toBe('No rule matched: forwarded to 9.9.9.9:53.');
    expect(explain(row({ cached: true }))).toBe('No rule matched: answered from the cache.');
    expect(explain(row({ upstream: null }))).toBe('No rule matched.');
  });
});

describe('statusWord and the one-click change', () => {
  it('blocked rows get an allow rule for the queried name, others a deny rule', () => {
    const b = row({ action: 'block', reason: 'blocklist_domain', name: 'Ads.Example.org.', matched: 'example.org' });
    expect(statusWord(b)).toBe('blocked');
    const c = changeFor(b);
    expect(c).toEqual({ op: 'add', rule: { list: 'allow', rule: 'ads.example.org' } });
    expect(buttonText(c, b)).toEqual({ text: 'Allow', label: 'Allow Ads.Example.org.' });
    expect(changeText(c)).toBe('Allowed ads.example.org: it resolves from now on.');
    expect(statusWord(row())).toBe('forwarded');
    expect(statusWord(row({ cached: true }))).toBe('cached');
    expect(statusWord(row({ action: 'local' }))).toBe('local');
    const f = row({ name: 'site.example' });
    expect(changeFor(f)).toEqual({ op: 'add', rule: { list: 'deny', rule: 'site.example' } });
    expect(buttonText(changeFor(f), f).label).toBe('Block site.example');
    // a user deny rule is beaten by an allow rule: still "allow"
    expect(changeFor(row({ action: 'block', reason: 'user_deny', name: 'x.example', source: '*.example' })))
      .toEqual({ op: 'add', rule: { list: 'allow', rule: 'x.example' } });
  });
  it('a name let through by the user allow rule loses that rule, as written', () => {
    const a = row({ action: 'allow', reason: 'user_allow', name: 'cdn.ads.example', source: '*.ads.example' });
    const c = changeFor(a);
    expect(c).toEqual({ op: 'remove', rule: { list: 'allow', rule: '*.ads.example' } });
    expect(buttonText(c, a)).toEqual({ text: 'Remove rule', label: 'Remove your allow rule *.ads.example' });
    expect(changeText(c)).toBe('Removed your allow rule *.ads.example.');
    expect(invert(c)).toEqual({ op: 'add', rule: c.rule });
    expect(invert(invert(c))).toEqual(c);
    // a list exception is beaten by a deny rule
    expect(changeFor(row({ action: 'allow', reason: 'blocklist_exception', name: 'ok.example', source: 'l' })))
      .toEqual({ op: 'add', rule: { list: 'deny', rule: 'ok.example' } });
  });
});

describe('live stream', () => {
  it('parses a record and refuses what is not one', () => {
    expect(parseLive(JSON.stringify(row()))?.name).toBe('example.org');
    expect(parseLive('{')).toBeNull();
    expect(parseLive('{"name": 1}')).toBeNull();
    expect(parseLive('null')).toBeNull();
  });
  it('puts the newest first and keeps at most the cap', () => {
    const a = row({ name: 'a' }), b = row({ name: 'b' }), c = row({ name: 'c' });
    expect(pushLive([a], [b, c]).map((r) => r.name)).toEqual(['c', 'b', 'a']);
    const many = Array.from({ length: LIVE_MAX + 5 }, (_, i) => row({ name: `n${i}` }));
    const out = pushLive([a], many);
    expect(out.length).toBe(LIVE_MAX);
    expect(out[0].name).toBe(`n${LIVE_MAX + 4}`);
    expect(pushLive([a, b], [c], 2).map((r) => r.name)).toEqual(['c', 'a']);
  });
  it('filters live rows the way the server filters the history', () => {
    const blocked = row({ action: 'block', name: 'ads.example.org' });
    expect(matches(blocked, { ...NONE, status: 'blocked' })).toBe(true);
    expect(matches(row(), { ...NONE, status: 'blocked' })).toBe(false);
    expect(matches(blocked, { ...NONE, status: 'allowed' })).toBe(false);
    expect(matches(row(), { ...NONE, status: 'forwarded' })).toBe(true);
    expect(matches(row({ upstream: null }), { ...NONE, status: 'forwarded' })).toBe(false);
    expect(matches(row({ cached: true }), { ...NONE, status: 'forwarded' })).toBe(false);
    expect(matches(row({ cached: true }), { ...NONE, status: 'cached' })).toBe(true);
    expect(matches(row({ action: 'local' }), { ...NONE, status: 'local' })).toBe(true);
    expect(matches(blocked, { ...NONE, name: 'ADS' })).toBe(true);
    expect(matches(blocked, { ...NONE, name: 'tracker' })).toBe(false);
    expect(matches(row(), { ...NONE, client: '192.168.1.20' })).toBe(true);
    expect(matches(row(), { ...NONE, client: '192.168.1.2' })).toBe(false);
    const ts = row().ts;
    expect(matches(row(), { ...NONE, from: ts, to: ts + 1 })).toBe(true);
    expect(matches(row(), { ...NONE, from: ts + 1 })).toBe(false);
    expect(matches(row(), { ...NONE, to: ts })).toBe(false);
    expect(matches(row(), { ...NONE, proto: 'udp' })).toBe(true);
    expect(matches(row(), { ...NONE, proto: 'tcp' })).toBe(false);
  });
});

describe('timeOfDay', () => {
  it('is HH:MM:SS in local time', () => {
    expect(timeOfDay(new Date(2026, 0, 2, 3, 4, 5).getTime())).toBe('03:04:05');
  });
});
