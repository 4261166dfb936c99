// The Settings page's logic (tests/ui/unit/settings.test.ts). The page is drawn from
// GET /api/schema, never from a list of its own: every row the schema marks editable becomes a
// field, its kind picks the input, its doc, range and apply mode are the help. Values come from
// GET /api/settings and go back through PUT /api/settings {settings: {key: value}}, only the
// ones changed; the answer's restart_required names those that wait for a restart.

/** One row of GET /api/schema (src/admin/settings.c nx_admin_handle_schema). */
export interface SchemaKey {
  path: string;
  type: string;
  kind: string; // bool uint string addr addr_list cidr_list upstreams strings block_addrs other
  apply: string; // live | reload | restart
  editable: boolean;
  default: string;
  default_value?: unknown;
  doc: string;
  range: string;
  min?: number;
  max?: number;
  choices?: string[];
}

export type Widget = 'bool' | 'number' | 'choice' | 'text' | 'lines';

/** The input a row gets; null for a kind the page cannot edit generically. */
export function widgetOf(k: SchemaKey): Widget | null {
  switch (k.kind) {
    case 'bool': return 'bool';
    case 'uint': return 'number';
    case 'string': case 'addr': return k.choices?.length ? 'choice' : 'text';
    case 'addr_list': case 'cidr_list': case 'upstreams': case 'strings': case 'block_addrs': return 'lines';
    default: return null;
  }
}

export interface Section { id: string; title: string; keys: SchemaKey[] }

/* Headings for the schema's top-level parts. Only words: which keys exist, and where, is the
 * schema's; a part not named here is titled by its own name. */
const TITLES: Record<string, string> = {
  upstream: 'Upstream servers', filter: 'Blocking', cache: 'Cache', logging: 'Query log and privacy',
  log: 'Daemon log', tls: 'TLS', access: 'Access', listener: 'Listeners', admin: 'Web admin',
  special: 'Special-use names', sync: 'Sync with a primary', dnstap: 'dnstap', query_budget: 'Query budget',
  run_as: 'Run as',
};

/* The order the sections read in: what a person changes most first (where answers come from,
 * what is blocked), the host's plumbing last. A section not named here follows, in the
 * schema's order. */
const ORDER = ['upstream', 'filter', 'special', 'cache', 'access', 'logging', 'log', 'tls', 'admin', 'sync', 'dnstap'];

/* Words a key's name abbreviates, as a label says them. */
const WORDS: Record<string, string> = {
  ms: '(ms)', qps: 'queries per second', ttl: 'TTL', ipv4: 'IPv4', ipv6: 'IPv6', tls: 'TLS',
  ddr: 'DDR', dns: 'DNS', doh: 'DoH', dot: 'DoT', priv: 'private', id: 'ID', ids: 'IDs', url: 'URL',
};

function words(part: string): string {
  return part.split('_').map((w) => WORDS[w] ?? w).join(' ');
}

/** The editable rows the page can draw, by their first path component, in the schema's order. */
export function sections(keys: SchemaKey[]): Section[] {
  const out: Section[] = [];
  for (const k of keys) {
    if (!k.editable || !widgetOf(k)) continue;
    const id = k.path.includes('.') ? k.path.slice(0, k.path.indexOf('.')) : 'general';
    let s = out.find((x) => x.id === id);
    if (!s) {
      s = { id, title: TITLES[id] ?? id.charAt(0).toUpperCase() + id.slice(1).replace(/_/g, ' '), keys: [] };
      out.push(s);
    }
    s.keys.push(k);
  }
  const rank = (id: string) => (ORDER.includes(id) ? ORDER.indexOf(id) : ORDER.length);
  // Array.prototype.sort is stable: unnamed sections keep the schema's order among themselves
  return out.sort((a, b) => rank(a.id) - rank(b.id));
}

/** The field's label: the key below its section in words ("upstream.timeout_ms" -> "Timeout
 * (ms)", "access.rate_limit.qps" -> "Rate limit: queries per second"). */
export function labelOf(k: SchemaKey): string {
  const parts = k.path.split('.');
  const below = parts.length > 1 ? parts.slice(1) : parts;
  const text = below.map(words).join(': ');
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** When a change takes effect, in words (the schema's apply mode). */
export function applyText(k: SchemaKey): string {
  if (k.apply === 'restart') return 'Applies after a restart of nxdns.';
  if (k.apply === 'reload') return 'Applies when saved (the config is reloaded).';
  return 'Applies at once.';
}

/** The value as an input's text: lists one entry per line, an object entry as its JSON. */
export function toText(k: SchemaKey, v: unknown): string {
  const w = widgetOf(k);
  if (w === 'lines') {
    return (Array.isArray(v) ? v : []).map((e) => (typeof e === 'string' ? e : JSON.stringify(e))).join('\n');
  }
  if (v === null || v === undefined) return '';
  return String(v);
}

/**
 * An input's text as the value PUT sends. Numbers: digits become a number, anything else goes
 * as typed so the loader's refusal ("is not a number") is what the field shows. Lists: one
 * entry per line; a line that is a JSON object (an upstream with pins, as GET showed it) is
 * sent as that object.
 */
export function fromText(k: SchemaKey, text: string): unknown {
  const w = widgetOf(k);
  if (w === 'number') {
    const t = text.trim();
    return /^\d+$/.test(t) ? Number(t) : t;
  }
  if (w === 'lines') {
    return text.split('\n').map((s) => s.trim()).filter(Boolean).map((s) => {
      if (s.startsWith('{')) {
        try { return JSON.parse(s) as unknown; } catch { /* sent as text: the server says why */ }
      }
      return s;
    });
  }
  return text;
}

export type Draft = Record<string, string | boolean>;

/** The form's starting state from GET /api/settings. */
export function draftOf(keys: SchemaKey[], values: Record<string, unknown>): Draft {
  const d: Draft = {};
  for (const k of keys) {
    if (!widgetOf(k)) continue; // not drawn, never sent
    d[k.path] = widgetOf(k) === 'bool' ? Boolean(values[k.path]) : toText(k, values[k.path]);
  }
  return d;
}

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** The keys of `keys` whose draft differs from what the server has, as PUT values. */
export function changes(keys: SchemaKey[], values: Record<string, unknown>, d: Draft): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of keys) {
    if (!(k.path in d) || !widgetOf(k)) continue;
    const v = widgetOf(k) === 'bool' ? Boolean(d[k.path]) : fromText(k, String(d[k.path]));
    if (!same(v, values[k.path])) out[k.path] = v;
  }
  return out;
}

/** The note after a save: null when nothing waits for a restart. */
export function restartNote(keys: string[]): string | null {
  if (!keys.length) return null;
  const list = keys.join(', ');
  return keys.length === 1
    ? `Saved. ${list} takes effect only after nxdns is restarted; until then the old value stays in use.`
    : `Saved. ${list} take effect only after nxdns is restarted; until then the old values stay in use.`;
}

/** A doc string as text and `code` parts, for drawing (no HTML is ever built from it). */
export function docParts(doc: string): { code: boolean; text: string }[] {
  return doc.split('`').map((text, i) => ({ code: i % 2 === 1, text })).filter((p) => p.text);
}

/** An input id for a key ("upstream.servers" -> "set-upstream-servers"). */
export function inputId(path: string): string {
  return `set-${path.replace(/[^A-Za-z0-9_-]/g, '-')}`;
}
