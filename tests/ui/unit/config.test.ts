import { describe, expect, it } from 'vitest';
import {
  LocalRecord, clientBody, clientForm, emptyClient, emptyGroup, emptyLocal, groupBody,
  groupForm, idText, localBody, localEditPath, localForm, sameRecord, toggle,
} from '../../../ui/src/config';

describe('groups', () => {
  it('builds the add body with the name, the edit body without it', () => {
    const f = { ...emptyGroup(), name: ' kids ', sources: ['ads'] };
    expect(groupBody(f, false)).toEqual({ name: 'kids', sources: ['ads'], filtering: true });
    expect(groupBody({ ...f, filtering: false }, true)).toEqual({ sources: ['ads'], filtering: false });
  });

  it('edits the sources as written, not the effective ones', () => {
    const f = groupForm({ name: 'kids', sources: ['a'], filtering: true, effective_sources: ['a', 'b'] });
    expect(f).toEqual({ name: 'kids', sources: ['a'], filtering: true });
  });

  it('toggles a checkbox keeping the order of the known names, unknown ones last', () => {
    const all = ['a', 'b', 'c'];
    expect(toggle(['c'], 'a', true, all)).toEqual(['a', 'c']);
    expect(toggle(['a', 'c'], 'a', false, all)).toEqual(['c']);
    expect(toggle(['gone', 'b'], 'a', true, all)).toEqual(['a', 'b', 'gone']);
    expect(toggle(['a'], 'a', true, all)).toEqual(['a']);
  });
});

describe('clients', () => {
  it('splits the ids and leaves no groups out of an add', () => {
    const f = { ...emptyClient(), name: 'tv ', ids: '192.168.1.20\n192.168.2.0/24, id:tv\n' };
    expect(clientBody(f, false)).toEqual({ name: 'tv', ids: ['192.168.1.20', '192.168.2.0/24', 'id:tv'] });
  });

  it('an edit without groups says default (an edit merges into the entry)', () => {
    const f = clientForm({ name: 'tv', ids: ['10.0.0.5', 'id:tv'], groups: ['kids'] });
    expect(f.ids).toBe('10.0.0.5\nid:tv');
    expect(clientBody(f, true)).toEqual({ ids: ['10.0.0.5', 'id:tv'], groups: ['kids'] });
    expect(clientBody({ ...f, groups: [] }, true)).toEqual({ ids: ['10.0.0.5', 'id:tv'], groups: ['default'] });
  });

  it('says what an id is', () => {
    expect(idText('id:phone')).toBe('DoH/DoT client id phone');
    expect(idText('10.0.0.0/24')).toBe('addresses in 10.0.0.0/24');
    expect(idText('10.0.0.5')).toBe('10.0.0.5');
  });
});

describe('local records', () => {
  const rec = (o: Partial<LocalRecord>): LocalRecord => ({ name: 'nas.lan', type: 'A', value: '10.0.0.2', ttl: 300, index: 0, ...o });

  it('sends the ttl as a number, leaves an empty one out, and anything else as typed', () => {
    expect(localBody({ ...emptyLocal(), name: ' nas.lan ', value: ' 10.0.0.2 ' })).toEqual({ name: 'nas.lan', type: 'A', value: '10.0.0.2' });
    expect(localBody({ name: 'a', type: 'TXT', value: 'hi', ttl: ' 60 ' }).ttl).toBe(60);
    expect(localBody({ name: 'a', type: 'TXT', value: 'hi', ttl: '1h' }).ttl).toBe('1h');
  });

  it('names the record to change by name, type and value (url-encoded)', () => {
    expect(localEditPath(rec({ name: 'nas.lan', type: 'A', value: '10.0.0.2' })))
      .toBe('/api/local-records?name=nas.lan&type=A&value=10.0.0.2');
    expect(localEditPath(rec({ name: 'x.lan', type: 'TXT', value: 'v=spf1 a&b' })))
      .toBe('/api/local-records?name=x.lan&type=TXT&value=v%3Dspf1+a%26b');
    expect(localEditPath(rec({ name: 'x.lan', type: 'TXT', value: null }))).toBe('/api/local-records?name=x.lan&type=TXT');
  });

  it('knows when an edit changes nothing', () => {
    const r = rec({});
    expect(sameRecord(r, localForm(r))).toBe(true);
    expect(sameRecord(r, { ...localForm(r), ttl: '' })).toBe(true);
    expect(sameRecord(r, { ...localForm(r), ttl: '301' })).toBe(false);
    expect(sameRecord(r, { ...localForm(r), value: '10.0.0.9' })).toBe(false);
  });
});
