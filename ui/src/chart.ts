// Shaping the API's time series for uPlot: pure functions, unit-tested (tests/ui/unit).

/** One bucket of GET /api/stats/history (src/querylog/querylog.h: nx_qlog_history). */
export interface HistoryPoint {
  t: number; // bucket start, epoch ms
  queries: number;
  blocked: number;
  cached?: number;
  forwarded?: number;
  local?: number;
}

export interface History {
  from: number;
  to: number;
  step: number; // seconds
  points: HistoryPoint[];
}

/** uPlot's columnar data: x in seconds, then one column per series. */
export type Columns = [number[], number[], number[]];

const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? v : 0);

/**
 * [t (s), queries, blocked], sorted by time, one row per bucket. Missing or malformed counts
 * become 0 (the API sends empty buckets as zeros; a reply missing one must not draw a gap that
 * reads as "no data"), duplicate bucket starts are summed, and blocked never exceeds queries.
 */
export function historyColumns(h: History | null | undefined): Columns {
  const byT = new Map<number, { q: number; b: number }>();
  for (const p of h?.points ?? []) {
    if (!p || typeof p.t !== 'number' || !Number.isFinite(p.t)) {
      continue;
    }
    const cur = byT.get(p.t) ?? { q: 0, b: 0 };
    cur.q += num(p.queries);
    cur.b += num(p.blocked);
    byT.set(p.t, cur);
  }
  const ts = [...byT.keys()].sort((a, b) => a - b);
  const x: number[] = [];
  const q: number[] = [];
  const b: number[] = [];
  for (const t of ts) {
    const v = byT.get(t)!;
    x.push(Math.floor(t / 1000));
    q.push(v.q);
    b.push(Math.min(v.b, v.q));
  }
  return [x, q, b];
}

/** Totals of the shaped columns, for the chart's text alternative. */
export function columnTotals(c: Columns): { queries: number; blocked: number; peak: number } {
  let queries = 0;
  let blocked = 0;
  let peak = 0;
  for (let i = 0; i < c[0].length; i++) {
    queries += c[1][i];
    blocked += c[2][i];
    peak = Math.max(peak, c[1][i]);
  }
  return { queries, blocked, peak };
}

/**
 * The window the dashboard asks for: the last 24 h ending at the end of the current bucket,
 * aligned to the step (the API aligns buckets to the epoch), so the newest bucket is "now".
 */
export function dayWindow(nowMs: number, stepS: number): { from: number; to: number } {
  const stepMs = stepS * 1000;
  const to = Math.ceil((nowMs + 1) / stepMs) * stepMs;
  return { from: to - 86400 * 1000, to };
}

/** Owners of GET /api/memory, largest first, the rest folded into one "other" row. */
export interface Owner {
  owner: string;
  bytes: number;
  count: number;
  help: string;
}

export function topOwners(owners: Owner[] | null | undefined, n: number): Owner[] {
  const live = (owners ?? []).filter((o) => o && num(o.bytes) > 0);
  live.sort((a, b) => b.bytes - a.bytes || a.owner.localeCompare(b.owner));
  if (live.length <= n) {
    return live;
  }
  const rest = live.slice(n);
  const other: Owner = {
    owner: `${rest.length} others`,
    bytes: rest.reduce((s, o) => s + o.bytes, 0),
    count: rest.reduce((s, o) => s + num(o.count), 0),
    help: rest.map((o) => o.owner).join(', '),
  };
  return [...live.slice(0, n), other];
}
