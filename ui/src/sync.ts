// Replica status in words (tests/ui/unit/sync.test.ts): the banner every page shows on a
// server that follows a primary (GET /api/sync/status, src/sync/replica.c nx_sync_status) and
// the primary's list of the replicas that pull from it (GET /api/sync/replicas,
// src/admin/api_sync.c).
import { ago } from './lists';

/** GET /api/sync/status: {replica: false, result: "off"} on a server that follows no primary. */
export interface SyncStatus {
  replica: boolean;
  primary?: string;
  interval?: number;     // seconds between pulls
  running?: boolean;
  last_attempt?: number | null; // epoch ms
  last_sync?: number | null;    // epoch ms of the last pull that reached the primary
  result: string;        // never | applied | not_modified | fetch_failed | invalid | reload_failed
  error?: string | null;
  generation?: string | null;
  pulls?: number;
  applied?: number;
}

/** One row of GET /api/sync/replicas. */
export interface Replica {
  token: string;     // the name of the read token the replica pulls with
  address: string;
  last_sync: number; // epoch ms of its last pull
  status: number;    // the HTTP status that pull got (200, 304, 500, ...)
  generation?: string | null;
  pulls: number;
}

/* The last pull's result (the nxdns_sync_pulls_total result label) in words; a result this
 * page does not know is said as its name. */
const RESULTS: Record<string, string> = {
  never: 'not synced yet',
  applied: 'the primary’s changes were applied',
  not_modified: 'up to date: nothing changed on the primary',
  fetch_failed: 'the primary could not be reached',
  invalid: 'the primary’s configuration was refused here',
  reload_failed: 'the primary’s configuration could not be loaded here',
};

export function resultText(result: string): string {
  return RESULTS[result] ?? result.replace(/_/g, ' ');
}

/** Did the last pull fail (the banner then shows as a warning, with the error)? */
export function failed(st: SyncStatus): boolean {
  return st.result === 'fetch_failed' || st.result === 'invalid' || st.result === 'reload_failed';
}

function agoMs(ms: number | null | undefined, nowMs: number): string {
  return ms ? ago(Math.floor(ms / 1000), nowMs) : 'never';
}

export interface Banner { title: string; detail: string; error: string | null }

/** What the replica banner says; null on a server that is no replica. */
export function banner(st: SyncStatus | null, nowMs: number): Banner | null {
  if (!st || !st.replica) return null;
  const primary = st.primary ?? 'its primary';
  // last_sync is the last pull that reached the primary, result the last attempt's: after a
  // failure both are said, so "2 min ago" is never read as a success
  let last: string;
  if (st.running) last = 'syncing now…';
  else if (st.result === 'never' || (!st.last_sync && !st.last_attempt)) last = 'not synced yet';
  else if (failed(st) || !st.last_sync) {
    last = `${st.last_sync ? `last sync ${agoMs(st.last_sync, nowMs)}` : 'never synced'}; the last attempt `
      + `${agoMs(st.last_attempt, nowMs)}: ${resultText(st.result)}`;
  } else last = `last sync ${agoMs(st.last_sync, nowMs)}: ${resultText(st.result)}`;
  return {
    title: `This server is a replica of ${primary}.`,
    detail: `Block lists, rules, groups, clients and local records follow the primary: change them there. ${last.charAt(0).toUpperCase()}${last.slice(1)}.`,
    error: failed(st) && st.error ? st.error : null,
  };
}

/** A replica row in words: "kitchen-pi (192.168.1.3): 5 min ago, up to date, 12 pulls". */
export function replicaText(r: Replica, nowMs: number): string {
  const got = r.status === 304 ? 'up to date' : r.status === 200 ? 'took a new configuration'
    : `refused (HTTP ${r.status})`;
  return `${agoMs(r.last_sync, nowMs)}, ${got}${r.generation ? ` (generation ${r.generation})` : ''}, ${r.pulls} ${r.pulls === 1 ? 'pull' : 'pulls'}`;
}

/** Most recently seen first. */
export function sortReplicas(list: Replica[]): Replica[] {
  return [...list].sort((a, b) => b.last_sync - a.last_sync || a.token.localeCompare(b.token));
}
