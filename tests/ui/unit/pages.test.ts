import { describe, expect, it } from 'vitest';
import { PAGES, pageOf } from '../../../ui/src/pages';
import { clientLabel } from '../../../ui/src/format';

describe('routes', () => {
  it('maps each page\'s address to it, anything else to the dashboard', () => {
    for (const p of PAGES) expect(pageOf(p.hash).id).toBe(p.id);
    expect(pageOf('').id).toBe('dashboard');
    expect(pageOf('#/nope').id).toBe('dashboard');
    expect(pageOf('#/rules/').id).toBe('rules');
    expect(pageOf('#/settings?x=1').id).toBe('settings');
  });

  it('has one address and title per page', () => {
    expect(new Set(PAGES.map((p) => p.hash)).size).toBe(PAGES.length);
    expect(new Set(PAGES.map((p) => p.title)).size).toBe(PAGES.length);
  });
});

describe('client names', () => {
  it('shows the name with the address beside it', () => {
    expect(clientLabel('192.168.1.20', 'tv')).toEqual({ main: 'tv', aside: '192.168.1.20' });
  });

  it('falls back to the address without a name (older servers, null, empty)', () => {
    expect(clientLabel('192.168.1.20')).toEqual({ main: '192.168.1.20', aside: '' });
    expect(clientLabel('192.168.1.20', null)).toEqual({ main: '192.168.1.20', aside: '' });
    expect(clientLabel('192.168.1.20', '  ')).toEqual({ main: '192.168.1.20', aside: '' });
    expect(clientLabel('::1', '::1')).toEqual({ main: '::1', aside: '' });
  });
});
