import { describe, expect, it } from 'vitest';
import { ApiError } from '../../../ui/src/api';
import {
  Source, ago, doneCount, emptyForm, entries, errorField, fieldMessage, formOf, lookupQuery, lookupText, markOf,
  optionsText, parseGroups, progress, skipRows, sourceBody,
} from '../../../ui/src/lists';

const src = (o: Partial<Source>): Source => ({
  name: 'ads', url: 'http://127.0.0.1/a.txt', format: 'hosts', groups: [], enabled: true,
  list: 0, wild: 0, fetched_at: 0, compiled_at: 0, errors: 0, ...o,
});

describe('source form', () => {
  it('builds the add body with the location under the chosen kind', () => {
    const f = { ...emptyForm(), name: ' ads ', kind: 'path' as const, location: ' lists/a.txt ', groups: 'kids, tv kids' };
    expect(sourceBody(f, false)).toEqual({
      name: 'ads', path: 'lists/a.txt', format: 'auto', groups: ['kids', 'tv'], enabled: true,
    });
  });

  it('leaves the name out of an edit (it is in the route) and keeps enabled false', () => {
    const f = { ...formOf(src({ groups: ['a', 'b'] })), enabled: false };
    const b = sourceBody(f, true);
    expect(b).toEqual({ url: 'http://127.0.0.1/a.txt', format: 'hosts', groups: ['a', 'b'], enabled: false });
    expect('name' in b).toBe(false);
  });

  it('reads a path source back as kind path', () => {
    const f = formOf({ name: 'local', path: '/etc/nxdns/l.txt', format: 'domains', groups: ['x'], enabled: true });
    expect(f.kind).toBe('path');
    expect(f.location).toBe('/etc/nxdns/l.txt');
    expect(f.groups).toBe('x');
  });

  it('leaves empty groups out of an add, and sets the default group on an edit', () => {
    const f = { ...emptyForm(), name: 'a', location: 'http://x/' };
    expect('groups' in sourceBody(f, false)).toBe(false);
    expect(sourceBody(f, true).groups).toEqual(['default']);
  });

  it('splits groups on commas and spaces without empties or repeats', () => {
    expect(parseGroups('')).toEqual([]);
    expect(parseGroups(' a,,b  a ,c ')).toEqual(['a', 'b', 'c']);
  });
});

describe('errorField', () => {
  const err = (field: string | undefined, message: string) => new ApiError(400, 'invalid_setting', message, field);

  it('puts the route\'s own fields at the field, url/path at the location', () => {
    expect(errorField(err('name', 'a source named ads exists'), 'url')).toBe('name');
    expect(errorField(err('url', 'a source needs a url or a path'), 'path')).toBe('path');
    expect(errorField(err('path', 'must be in /etc'), 'path')).toBe('path');
  });

  it('finds the field in the loader\'s message for filter.sources', () => {
    expect(errorField(err('filter.sources', "filter.sources[1].url: 'ftp://x' is not an http:// or https:// URL"), 'url'))
      .toBe('url');
    expect(errorField(err('filter.sources', "filter.sources[0].format: 'csv' is not one of auto"), 'url'))
      .toBe('format');
    expect(errorField(err('filter.sources', "filter.sources[2].groups: no group 'tv'"), 'url')).toBe('groups');
    expect(errorField(err('filter.sources', "filter.sources[2]: needs a url or a path"), 'path')).toBe('path');
  });

  it('drops the file key\'s label from the message shown at the field', () => {
    expect(fieldMessage("filter.sources[1].url: 'ftp://x' is not an http:// or https:// URL"))
      .toBe("'ftp://x' is not an http:// or https:// URL");
    expect(fieldMessage("filter.sources[0].groups[2]: unknown group 'tv'")).toBe("unknown group 'tv'");
    expect(fieldMessage('filter.sources[3]: needs a url or a path')).toBe('needs a url or a path');
    expect(fieldMessage('a source named ads exists')).toBe('a source named ads exists');
  });

  it('gives the form the rest', () => {
    expect(errorField(err(undefined, 'the server is busy'), 'url')).toBeNull();
    expect(errorField(err('filter.groups', 'x'), 'url')).toBeNull();
    expect(errorField(new Error('boom'), 'url')).toBeNull();
  });
});

describe('status in words', () => {
  it('counts names and wildcards as entries', () => {
    expect(entries(src({ list: 3, wild: 2, allow: 9 }))).toBe(5);
    expect(entries({ name: 'x', format: 'auto', groups: [], enabled: true })).toBe(0);
  });

  it('says how long ago, never for 0', () => {
    const now = 1_000_000_000_000;
    expect(ago(0, now)).toBe('never');
    expect(ago(now / 1000, now)).toBe('just now');
    expect(ago(now / 1000 - 42, now)).toBe('42 s ago');
    expect(ago(now / 1000 - 3 * 60, now)).toBe('3 min ago');
    expect(ago(now / 1000 - 5 * 3600, now)).toBe('5 h ago');
    expect(ago(now / 1000 - 2 * 86400, now)).toBe('2 d ago');
  });

  it('lists the skip reasons, most frequent first, marking more lines than the examples', () => {
    const rows = skipRows(src({
      skipped_by_reason: {
        bad_name: { count: 2, first_lines: [3, 9], help: 'not a domain name' },
        regex_rule: { count: 7, first_lines: [1, 2, 4], help: 'regexes are not supported' },
      },
    }));
    expect(rows.map((r) => r.reason)).toEqual(['regex rule', 'bad name']);
    expect(rows[0].lines).toBe('1, 2, 4, …');
    expect(rows[1].lines).toBe('3, 9');
    expect(rows[1].help).toBe('not a domain name');
    expect(skipRows(src({}))).toEqual([]);
  });
});

describe('refresh progress', () => {
  const before = [src({ name: 'a', fetched_at: 100 }), src({ name: 'b', errors: 1 }),
    src({ name: 'c', compiled_at: 50 }), src({ name: 'off', enabled: false }),
    { name: 'file', path: '/x', format: 'auto', groups: [], enabled: true, compiled_at: 1 }];

  it('starts with every enabled URL source waiting (files and disabled ones take no part)', () => {
    const p = progress(markOf(before), before);
    expect(p).toEqual({ a: 'waiting', b: 'waiting', c: 'waiting' });
    expect(doneCount(p)).toEqual({ done: 0, total: 3 });
  });

  it('marks newer downloads and compiles updated, a new error failed', () => {
    const now = [src({ name: 'a', fetched_at: 101 }), src({ name: 'b', errors: 2 }),
      src({ name: 'c', compiled_at: 50 }), src({ name: 'off', enabled: false, fetched_at: 999 }),
      { name: 'file', path: '/x', format: 'auto', groups: [], enabled: true, compiled_at: 9 }];
    const p = progress(markOf(before), now);
    expect(p).toEqual({ a: 'updated', b: 'failed', c: 'waiting' });
    expect(doneCount(p)).toEqual({ done: 2, total: 3 });
  });

  it('treats a source added meanwhile as new', () => {
    const p = progress(markOf(before), [...before, src({ name: 'new', compiled_at: 1 })]);
    expect(p.new).toBe('updated');
  });
});

describe('lookupText', () => {
  it('names the list and the matched entry of a block', () => {
    expect(lookupText({ name: 'x.ads.test', action: 'block', reason: 'blocklist_wildcard', matched: 'ads.test', source: 'ads' }))
      .toBe('Blocked: a list blocks it and its subdomains (list “ads”, entry ads.test).');
    expect(lookupText({ name: 'ads.test', action: 'block', reason: 'blocklist_domain', matched: 'ads.test', source: 'ads' }))
      .toBe('Blocked: a list names it (list “ads”).');
  });

  it('says allowed and why without a list', () => {
    expect(lookupText({ name: 'ok.test', action: 'allow', reason: 'none', matched: '', source: '' }))
      .toBe('Allowed: no list or rule matches it.');
    expect(lookupText({ name: 'ok.test', action: 'allow', reason: 'user_allow', matched: 'ok.test', source: '' }))
      .toBe('Allowed: a user allow rule matches it.');
  });
});

describe('lookup query', () => {
  it('always sends name and type, client and client id only when given', () => {
    expect(lookupQuery(' ads.test ', 'AAAA', '', '')).toBe('/api/lookup?name=ads.test&type=AAAA');
    expect(lookupQuery('ads.test', '', ' 192.168.1.5 ', ' kid-phone ')).toBe(
      '/api/lookup?name=ads.test&type=A&client=192.168.1.5&client_id=kid-phone');
  });

  it('says the type asked about unless it is A', () => {
    const r = { name: 'x.test', action: 'block', reason: 'user_deny', matched: 'x.test', source: '' };
    expect(lookupText(r, 'HTTPS')).toBe('Blocked for HTTPS: a user deny rule matches it.');
    expect(lookupText(r, 'A')).toBe('Blocked: a user deny rule matches it.');
    expect(lookupText(r)).toBe('Blocked: a user deny rule matches it.');
  });
});

describe('hosts_answers and subdomains', () => {
  const url: Source = { name: 'big', url: 'https://x/l.txt', format: 'hosts', groups: ['default'], enabled: true,
    hosts_answers: 'null', subdomains: false };
  it('a new source sends them only when the person chose something other than the default', () => {
    const f = { ...emptyForm(), name: 'a', location: 'http://x/' };
    const b = sourceBody(f, false);
    expect('hosts_answers' in b || 'subdomains' in b).toBe(false);
    expect(sourceBody({ ...f, hostsAnswers: 'null', subdomains: true }, false))
      .toMatchObject({ hosts_answers: null, subdomains: true });
    expect(sourceBody({ ...f, hostsAnswers: 'listed' }, false).hosts_answers).toBe('listed');
  });
  it('an edit sends what changed from the loaded source, JSON null for null', () => {
    const f = formOf(url);
    expect(f.hostsAnswers).toBe('null');
    expect('hosts_answers' in sourceBody(f, true) || 'subdomains' in sourceBody(f, true)).toBe(false);
    expect(sourceBody({ ...f, hostsAnswers: 'listed' }, true).hosts_answers).toBe('listed');
    const on = formOf({ ...url, hosts_answers: 'listed', subdomains: true });
    expect(sourceBody({ ...on, hostsAnswers: 'null', subdomains: false }, true))
      .toMatchObject({ hosts_answers: null, subdomains: false });
  });
  it('a loader refusal of either lands at its field', () => {
    const e = new ApiError(400, 'invalid_setting', "filter.sources[0].hosts_answers: 'x' is not one of null, listed",
      'filter.sources');
    expect(errorField(e, 'url')).toBe('hosts_answers');
    expect(errorField(new ApiError(400, 'bad_request', 'subdomains must be true or false', 'subdomains'), 'url'))
      .toBe('subdomains');
  });
  it('the status line says what the options do, nothing when they are the plain defaults', () => {
    expect(optionsText(url)).toBe('');
    expect(optionsText({ ...url, subdomains: true, hosts_answers: 'listed' }))
      .toBe('entries cover their subdomains · hosts addresses answered');
    expect(optionsText({ ...url, format: 'domains', hosts_answers: 'listed' })).toBe('');
  });
});
