// Every reason the server reports has words on the query log and in the lists lookup. The
// reasons are read from src/filter/result.h itself (NX_FILTER_REASONS), never copied here, so
// a reason added to the server without a sentence fails this test.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { QueryRow, explain, reasonSentence } from '../../../ui/src/querylog';
import { LOOKUP_REASONS, lookupText } from '../../../ui/src/lists';

function headerReasons(): string[] {
  const h = readFileSync(fileURLToPath(new URL('../../../src/filter/result.h', import.meta.url)), 'utf8');
  const start = h.indexOf('#define NX_FILTER_REASONS(X)');
  expect(start).toBeGreaterThanOrEqual(0);
  // the macro runs to the first line that does not end in a backslash
  const lines: string[] = [];
  for (const line of h.slice(start).split('\n')) {
    lines.push(line);
    if (!line.trimEnd().endsWith('\\')) break;
  }
  return [...lines.join('\n').matchAll(/X\(\s*\w+\s*,\s*"([^"]+)"\s*\)/g)].map((m) => m[1]);
}

function row(o: Partial<QueryRow>): QueryRow {
  return {
    ts: 1, client: '10.0.0.2', proto: 'udp', qtype: 'A', rcode: 'NOERROR', action: 'none',
    reason: 'none', name: 'nas', matched: 'nas', source: '', answer: '', upstream: null,
    cached: false, duration_us: 1, client_id: '', ...o,
  };
}

const REASONS = headerReasons();

describe('reasons of src/filter/result.h', () => {
  it('are read from the header (the list is not empty and has the ones the UI always knew)', () => {
    expect(REASONS.length).toBeGreaterThan(8);
    expect(REASONS).toEqual(expect.arrayContaining(['none', 'blocklist_domain', 'user_deny']));
  });
  it.each(REASONS)('%s has a query log sentence', (reason) => {
    for (const action of ['allow', 'local']) {
      const s = reasonSentence(row({ reason, action }));
      expect(s, `${reason} / ${action}`).toBeTruthy();
      expect(s).toMatch(/\.$/);
    }
  });
  it.each(REASONS)('%s has lookup words', (reason) => {
    expect(LOOKUP_REASONS[reason], reason).toBeTruthy();
    expect(lookupText({ name: 'nas', action: 'allow', reason, matched: '', source: '' })).not.toContain('_');
  });
  it('a reason the page does not know falls back to the action, not to silence', () => {
    expect(reasonSentence(row({ reason: 'from_the_future' }))).toBeNull();
    expect(explain(row({ reason: 'from_the_future', action: 'block', source: 'ads' }))).toBe('Blocked by the list “ads”.');
    expect(explain(row({ reason: 'from_the_future', action: 'local' }))).toBe('Answered locally.');
  });
});

describe('the words of the newer reasons', () => {
  it('special-use names say which setting decides them', () => {
    expect(explain(row({ action: 'local', reason: 'single_label', name: 'nas', matched: 'nas', source: 'special.domain_needed' })))
      .toBe('Answered locally: nas is a single-label name, a name of this network that public DNS cannot know, so it is not forwarded (setting special.domain_needed).');
    expect(explain(row({ action: 'local', reason: 'special_localhost', name: 'localhost', source: 'special.localhost' })))
      .toMatch(/loopback.*\(setting special\.localhost\)\.$/);
    expect(lookupText({ name: 'nas', action: 'local', reason: 'single_label', matched: 'nas', source: 'special.domain_needed' }))
      .toBe('Answered locally: a single-label name is a local name, answered here, never forwarded (setting special.domain_needed).');
  });
  it('AdGuard rule reasons name the list, the anchor and the answer', () => {
    expect(explain(row({ action: 'block', reason: 'blocklist_rule', name: 'x.ads.test', matched: 'ads.test', source: 'adguard' })))
      .toBe('Blocked: a rule of the list “adguard” matches ads.test (a parent of this name).');
    expect(explain(row({ action: 'block', reason: 'blocklist_rule', name: 'ad1.test', matched: '', source: 'adguard' })))
      .toBe('Blocked: a pattern rule of the list “adguard” matches this name.');
    expect(explain(row({ action: 'block', reason: 'blocklist_hosts', name: 'nas.test', matched: 'nas.test', source: 'hosts', answer: '192.0.2.7' })))
      .toBe('Answered with the address the list “hosts” gives nas.test (192.0.2.7): a hosts line with a real address.');
    expect(explain(row({ action: 'block', reason: 'blocklist_rewrite', source: 'adguard', answer: 'NXDOMAIN' })))
      .toBe('Rewritten: a $dnsrewrite rule of the list “adguard” sets the answer (NXDOMAIN).');
  });
  it('a user rule in the lookup is called a rule, not a list', () => {
    expect(lookupText({ name: 'a.tiktok.com', action: 'block', reason: 'user_deny', matched: 'tiktok.com', source: '*.tiktok.com' }))
      .toBe('Blocked: a user deny rule matches it (rule “*.tiktok.com”, entry tiktok.com).');
  });
});
