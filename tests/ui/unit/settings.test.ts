import { describe, expect, it } from 'vitest';
import {
  SchemaKey, applyText, changes, docParts, draftOf, fromText, inputId, labelOf, restartNote, sections,
  toText, widgetOf,
} from '../../../ui/src/settings';

// Rows shaped as GET /api/schema answers them (trimmed docs).
const row = (o: Partial<SchemaKey>): SchemaKey => ({
  path: 'x.y', type: 'unsigned integer', kind: 'uint', apply: 'live', editable: true, default: '0',
  doc: '', range: '', ...o,
});
const SCHEMA: SchemaKey[] = [
  row({ path: 'listener.dns', kind: 'addr_list', apply: 'restart', editable: false }),
  row({ path: 'tls.server_name', kind: 'string', type: 'host name (optional)' }),
  row({ path: 'upstream.servers', kind: 'upstreams', range: '1..16 entries' }),
  row({ path: 'upstream.race', range: '1..16', min: 1, max: 16 }),
  row({ path: 'upstream.forward_zones', kind: 'other' }),
  row({ path: 'filter.enabled', kind: 'bool' }),
  row({ path: 'filter.block_mode', kind: 'string', choices: ['null', 'nxdomain', 'refused', 'custom'] }),
  row({ path: 'filter.block_addresses', kind: 'block_addrs' }),
  row({ path: 'cache.size', apply: 'restart' }),
  row({ path: 'logging.retention_days' }),
];

describe('the settings page from the schema', () => {
  it('shows only editable rows it can draw, by section in reading order, keys in the schema\'s', () => {
    const s = sections(SCHEMA);
    expect(s.map((x) => x.id)).toEqual(['upstream', 'filter', 'cache', 'logging', 'tls']);
    expect(s[0].keys.map((k) => k.path)).toEqual(['upstream.servers', 'upstream.race']);
    expect(s.map((x) => x.title)).toEqual(['Upstream servers', 'Blocking', 'Cache', 'Query log and privacy', 'TLS']);
    expect(sections([row({ path: 'new_part.key' })])[0].title).toBe('New part');
  });

  it('puts the newer sections where they read well, unnamed ones after in the schema\'s order', () => {
    const s = sections([
      row({ path: 'zeta.a' }), row({ path: 'dnstap.socket', kind: 'string' }), row({ path: 'alpha.b' }),
      row({ path: 'special.ddr', kind: 'bool' }), row({ path: 'access.rate_limit.qps' }),
      row({ path: 'filter.rebinding_protection', kind: 'bool' }), row({ path: 'sync.interval' }),
      row({ path: 'admin.tls', kind: 'bool', apply: 'restart' }),
    ]);
    expect(s.map((x) => x.title)).toEqual(['Blocking', 'Special-use names', 'Access', 'Web admin',
      'Sync with a primary', 'dnstap', 'Zeta', 'Alpha']);
  });

  it('picks the input by kind', () => {
    expect(SCHEMA.map((k) => widgetOf(k))).toEqual(
      ['lines', 'text', 'lines', 'number', null, 'bool', 'choice', 'lines', 'number', 'number']);
  });

  it('labels and explains a row', () => {
    expect(labelOf(row({ path: 'upstream.timeout_ms' }))).toBe('Timeout (ms)');
    expect(labelOf(row({ path: 'access.rate_limit.qps' }))).toBe('Rate limit: queries per second');
    expect(labelOf(row({ path: 'access.rate_limit.ipv6_prefix' }))).toBe('Rate limit: IPv6 prefix');
    expect(labelOf(row({ path: 'special.bogus_priv' }))).toBe('Bogus private');
    expect(labelOf(row({ path: 'admin.tls' }))).toBe('TLS');
    expect(labelOf(row({ path: 'state_dir' }))).toBe('State dir');
    expect(applyText(row({ apply: 'restart' }))).toBe('Applies after a restart of nxdns.');
    expect(applyText(row({ apply: 'live' }))).toBe('Applies at once.');
    expect(inputId('upstream.servers')).toBe('set-upstream-servers');
    expect(docParts('`null` (`0.0.0.0` for A)')).toEqual([
      { code: true, text: 'null' }, { code: false, text: ' (' }, { code: true, text: '0.0.0.0' }, { code: false, text: ' for A)' },
    ]);
  });

  it('turns values into text and back', () => {
    const up = SCHEMA[2];
    const pinned = { url: 'tls://9.9.9.9', pin_sha256: ['abc='] };
    const text = toText(up, ['1.1.1.1:53', pinned]);
    expect(text).toBe('1.1.1.1:53\n{"url":"tls://9.9.9.9","pin_sha256":["abc="]}');
    expect(fromText(up, `${text}\n\n  9.9.9.9 \n`)).toEqual(['1.1.1.1:53', pinned, '9.9.9.9']);
    expect(fromText(up, '{broken')).toEqual(['{broken']);
    expect(fromText(SCHEMA[3], ' 4 ')).toBe(4);
    expect(fromText(SCHEMA[3], 'four')).toBe('four'); // the server says why it is refused
    expect(toText(SCHEMA[3], 4)).toBe('4');
    expect(toText(SCHEMA[1], null)).toBe('');
  });

  it('sends only what changed', () => {
    const keys = SCHEMA.filter((k) => k.editable);
    const values = {
      'tls.server_name': '', 'upstream.servers': ['1.1.1.1:53'], 'upstream.race': 2, 'filter.enabled': true,
      'filter.block_mode': 'null', 'filter.block_addresses': [], 'cache.size': 10000, 'logging.retention_days': 7,
    };
    const d = draftOf(keys, values);
    expect(d['filter.enabled']).toBe(true);
    expect(changes(keys, values, d)).toEqual({});
    d['upstream.servers'] = '1.1.1.1:53\n9.9.9.9:53';
    d['cache.size'] = '500';
    d['filter.enabled'] = false;
    expect(changes(keys, values, d)).toEqual({
      'upstream.servers': ['1.1.1.1:53', '9.9.9.9:53'], 'filter.enabled': false, 'cache.size': 500,
    });
  });

  it('says plainly what waits for a restart', () => {
    expect(restartNote([])).toBeNull();
    expect(restartNote(['cache.size'])).toBe('Saved. cache.size takes effect only after nxdns is restarted; until then the old value stays in use.');
    expect(restartNote(['cache.size', 'cache.prefetch'])).toContain('cache.size, cache.prefetch take effect only after');
  });
});
