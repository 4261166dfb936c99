import { describe, expect, it } from 'vitest';
import { ApiError } from '../../../ui/src/api';
import { locate, splitLines, splitList } from '../../../ui/src/forms';

// The messages below are what the server answered for these bodies (src/conf loader).
const refusal = (field: string, message: string) => new ApiError(400, 'invalid_setting', message, field);

describe('list fields', () => {
  it('splits on commas, spaces and new lines, without empties or repeats', () => {
    expect(splitList(' 10.0.0.5,\n10.0.0.6  id:tv\n\n10.0.0.5 ')).toEqual(['10.0.0.5', '10.0.0.6', 'id:tv']);
    expect(splitList('  ')).toEqual([]);
  });

  it('keeps a line whole when entries may hold spaces', () => {
    expect(splitLines(' a b \n\n c ')).toEqual(['a b', 'c']);
  });
});

describe('which field a refusal belongs to', () => {
  const CLIENT = ['name', 'ids', 'groups'];

  it('finds the field inside an indexed path, and says which entry', () => {
    const e = refusal('clients', "clients[0].ids[1]: bad address '10.0.0.1/8': host bits are set past the prefix length");
    expect(locate(e, 'clients', CLIENT, 'name')).toEqual({
      field: 'ids', message: "Entry 2: bad address '10.0.0.1/8': host bits are set past the prefix length",
    });
  });

  it('finds the field after a named path part (a group\'s sources)', () => {
    const e = refusal('groups', "groups.kids.sources[0]: unknown source 'nope'");
    expect(locate(e, 'groups', ['name', 'sources', 'filtering'], 'name')).toEqual({
      field: 'sources', message: "Entry 1: unknown source 'nope'",
    });
  });

  it('sends a refusal of the whole key to the fallback, without the key label', () => {
    const e = refusal('groups', "groups: 'Bad Name' is not a valid group name (1..64 of a-z)");
    expect(locate(e, 'groups', ['name', 'sources'], 'name')).toEqual({
      field: 'name', message: "'Bad Name' is not a valid group name (1..64 of a-z)",
    });
    expect(locate(e, 'groups', ['name', 'sources'], null).field).toBeNull();
  });

  it('takes a field the route names itself, without the key label', () => {
    const e = refusal('rule', "filter.deny[0]: 'bad..name': not a name, *.name or /regex/");
    expect(locate(e, 'filter.deny', ['rule', 'list'], null)).toEqual({
      field: 'rule', message: "'bad..name': not a name, *.name or /regex/",
    });
    const dup = new ApiError(409, 'exists', "a client named 'tv' exists", 'name');
    expect(locate(dup, 'clients', CLIENT, null)).toEqual({ field: 'name', message: "a client named 'tv' exists" });
  });

  it('takes a scalar field without an index', () => {
    const e = refusal('local_records', "local_records[0].value: '1.2.3' is not an IPv4 address (type A)");
    expect(locate(e, 'local_records', ['name', 'type', 'value', 'ttl'], null)).toEqual({
      field: 'value', message: "'1.2.3' is not an IPv4 address (type A)",
    });
  });

  it('puts a settings refusal at the key, with the entry of a list', () => {
    const e = refusal('upstream.servers', "upstream.servers[1]: bad address 'bogus': not an IP address");
    expect(locate(e, 'upstream.servers', ['upstream.servers'], 'upstream.servers')).toEqual({
      field: 'upstream.servers', message: "Entry 2: bad address 'bogus': not an IP address",
    });
    const s = refusal('upstream.race', 'upstream.race: 99 is out of range 1..16');
    expect(locate(s, 'upstream.race', ['upstream.race'], 'upstream.race')).toEqual({
      field: 'upstream.race', message: '99 is out of range 1..16',
    });
  });

  it('leaves a failure that is not the server\'s at the form', () => {
    expect(locate(new Error('boom'), 'clients', CLIENT, 'name')).toEqual({ field: null, message: 'boom' });
    const other = refusal('logging', 'something else entirely');
    expect(locate(other, 'clients', CLIENT, 'name')).toEqual({ field: null, message: 'something else entirely' });
  });
});
