import { describe, expect, it } from 'vitest';
import { Replica, SyncStatus, banner, failed, replicaText, resultText, sortReplicas } from '../../../ui/src/sync';

const NOW = 1_800_000_000_000;
const REPLICA: SyncStatus = {
  replica: true, primary: 'https://nxdns-1.lan:8080', interval: 300, running: false,
  last_attempt: NOW - 120_000, last_sync: NOW - 120_000, result: 'not_modified', error: null, pulls: 4, applied: 1,
};

describe('the replica banner', () => {
  it('is not shown on a server that follows no primary (or before the status is read)', () => {
    expect(banner({ replica: false, result: 'off' }, NOW)).toBeNull();
    expect(banner(null, NOW)).toBeNull();
  });
  it('names the primary, the last sync and its result', () => {
    const b = banner(REPLICA, NOW)!;
    expect(b.title).toBe('This server is a replica of https://nxdns-1.lan:8080.');
    expect(b.detail).toBe('Block lists, rules, groups, clients and local records follow the primary: change them there. '
      + 'Last sync 2 min ago: up to date: nothing changed on the primary.');
    expect(b.error).toBeNull();
  });
  it('shows the error of a failed pull, and "never" before the first', () => {
    const b = banner({ ...REPLICA, last_sync: null, result: 'fetch_failed', error: 'connect: connection refused' }, NOW)!;
    expect(b.detail).toMatch(/ Never synced; the last attempt 2 min ago: the primary could not be reached\.$/);
    // a failure after an earlier success says both, so the old sync does not read as this one
    expect(banner({ ...REPLICA, last_sync: NOW - 3_600_000, result: 'fetch_failed' }, NOW)!.detail)
      .toMatch(/ Last sync 1 h ago; the last attempt 2 min ago: the primary could not be reached\.$/);
    expect(banner({ ...REPLICA, last_sync: null, last_attempt: null, result: 'never' }, NOW)!.detail)
      .toMatch(/ Not synced yet\.$/);
    expect(b.error).toBe('connect: connection refused');
    expect(failed({ ...REPLICA, result: 'invalid' })).toBe(true);
    expect(failed(REPLICA)).toBe(false);
    // an error left from an earlier pull is not shown once a pull succeeded
    expect(banner({ ...REPLICA, result: 'applied', error: 'old' }, NOW)!.error).toBeNull();
  });
  it('says a running pull, and words an unknown result by its name', () => {
    expect(banner({ ...REPLICA, running: true }, NOW)!.detail).toMatch(/Syncing now…\.$/);
    expect(resultText('never')).toBe('not synced yet');
    expect(resultText('some_new_result')).toBe('some new result');
  });
});

describe('the primary\'s replicas', () => {
  const r = (o: Partial<Replica>): Replica => ({ token: 'pi', address: '192.168.1.3', last_sync: NOW - 60_000,
    status: 304, generation: '7', pulls: 12, ...o });
  it('says when each last pulled and what it got', () => {
    expect(replicaText(r({}), NOW)).toBe('1 min ago, up to date (generation 7), 12 pulls');
    expect(replicaText(r({ status: 200, pulls: 1, generation: null }), NOW)).toBe('1 min ago, took a new configuration, 1 pull');
    expect(replicaText(r({ status: 500 }), NOW)).toMatch(/refused \(HTTP 500\)/);
  });
  it('lists the most recently seen first', () => {
    const list = [r({ token: 'a', last_sync: NOW - 9000 }), r({ token: 'b', last_sync: NOW - 10 })];
    expect(sortReplicas(list).map((x) => x.token)).toEqual(['b', 'a']);
  });
});
