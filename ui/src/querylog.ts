// The query log page's logic: pure functions, unit-tested (tests/ui/unit/querylog.test.ts).
// What a row says in words, the /api/queries URL a filter form makes, the rule a click
// creates, and the bounded list the live stream feeds.

/** One query as /api/queries and the live stream send it (src/querylog/reader.c item_json). */
export interface QueryRow {
  ts: number;
  client: string;
  proto: string;
  qtype: string;
  rcode: string;
  action: string; // none | allow | block | local
  reason: string; // src/filter/result.h NX_FILTER_REASONS
  name: string;
  matched: string;
  source: string;
  answer: string;
  upstream?: string | null;
  cached: boolean;
  duration_us: number;
  client_id: string;
  client_name?: string | null; // the client's name when the server knows one (newer servers)
  id?: number;
}

export interface QueryPage {
  items: QueryRow[];
  next_cursor: string | null;
}

/** The history form: every field optional; times are epoch ms (0 = unbounded). */
export interface Filter {
  client: string;
  name: string;
  status: string; // all | blocked | allowed | cached | forwarded | local
  proto: string; // '' = any, else udp | tcp | dot | doh
  from: number;
  to: number;
}

export const STATUSES = ['all', 'blocked', 'allowed', 'cached', 'forwarded', 'local'] as const;
export const PROTOS = ['udp', 'tcp', 'dot', 'doh'] as const; // src/querylog NX_QLOG_PROTOS
export const PAGE_SIZE = 50; // rows per history page: one screen on a desktop, cheap to read
export const LIVE_MAX = 200; // rows the live view keeps: a minute of a busy home, bounded

/** /api/queries?... for a filter and a cursor (null = newest page); empty fields are left out. */
export function queriesUrl(f: Filter, cursor: string | null, limit = PAGE_SIZE): string {
  const p = new URLSearchParams();
  if (f.client.trim()) p.set('client', f.client.trim());
  if (f.name.trim()) p.set('name', f.name.trim().toLowerCase());
  if (f.status && f.status !== 'all') p.set('status', f.status);
  if (f.proto) p.set('proto', f.proto);
  if (f.from > 0) p.set('from', String(f.from));
  if (f.to > 0) p.set('to', String(f.to));
  if (cursor) p.set('cursor', cursor);
  p.set('limit', String(limit));
  return `/api/queries?${p.toString()}`;
}

/** A <input type="datetime-local"> value ("2026-12-01T10:30") as epoch ms; 0 when empty/bad. */
export function localTimeMs(v: string): number {
  if (!v) return 0;
  const ms = new Date(v).getTime();
  return Number.isFinite(ms) && ms > 0 ? ms : 0;
}

export function isBlocked(r: QueryRow): boolean {
  return r.action === 'block';
}

/** The `special.*` key a special-use name's row names as its source (nx_policy_source_name),
 * said at the end of the sentence so a person knows which setting to change. */
function keyNote(r: QueryRow, fallback: string): string {
  return ` (setting ${r.source || fallback})`;
}

/**
 * Why the row was answered the way it was, as a sentence; null for a reason this page has no
 * words for (a newer server's), which explain() then words from the action alone. Every reason
 * of src/filter/result.h has a case here: tests/ui/unit/reasons.test.ts reads the header.
 */
export function reasonSentence(r: QueryRow): string | null {
  const m = r.matched || r.name;
  const parent = r.matched && r.matched !== r.name ? `${r.matched} (a parent of this name)` : m;
  const list = r.source ? `the list “${r.source}”` : 'a block list';
  switch (r.reason) {
    case 'none':
      if (r.action === 'block') return null; // a block without a reason: say what is known
      if (r.cached) return 'No rule matched: answered from the cache.';
      if (r.upstream) return `No rule matched: forwarded to ${r.upstream}.`;
      return 'No rule matched.';
    case 'blocklist_domain':
      return `Blocked: ${parent} is on ${list}.`;
    case 'blocklist_wildcard':
      return `Blocked: ${list} blocks ${m} and every name below it.`;
    case 'blocklist_exception':
      return `Allowed: ${list} makes an exception for ${m}.`;
    case 'blocklist_rule':
      // a rule with modifiers ($client, $dnstype, ...), a pattern or a regex: the row has the
      // name it anchored on when it has one, not the rule's text
      return r.matched
        ? `Blocked: a rule of ${list} matches ${parent}.`
        : `Blocked: a pattern rule of ${list} matches this name.`;
    case 'blocklist_rewrite':
      return `Rewritten: a $dnsrewrite rule of ${list} sets the answer${r.answer ? ` (${r.answer})` : ''}.`;
    case 'blocklist_hosts':
      return `Answered with the address ${list} gives ${m}${r.answer ? ` (${r.answer})` : ''}: a hosts line with a real address.`;
    case 'user_deny':
      return `Blocked by your rule “${r.source || m}”.`;
    case 'user_allow':
      return `Allowed by your rule “${r.source || m}”.`;
    case 'local_record':
      return 'Answered from a local record.';
    case 'paused':
      return 'Filtering was paused: answered without looking at the lists.';
    case 'special_localhost':
      return `Answered locally with the loopback address: localhost names never leave this host${keyNote(r, 'special.localhost')}.`;
    case 'special_use_name':
      return `Answered locally: ${m} is a special-use name (local, invalid, home.arpa) that public DNS cannot know, so it is not forwarded${keyNote(r, 'special.domain_needed')}.`;
    case 'single_label':
      return `Answered locally: ${m} is a single-label name, a name of this network that public DNS cannot know, so it is not forwarded${keyNote(r, 'special.domain_needed')}.`;
    case 'private_reverse':
      return `Answered locally: the reverse name of a private address is not sent to public DNS${keyNote(r, 'special.bogus_priv')}.`;
    case 'firefox_canary':
      return `Blocked: Firefox's canary name, so Firefox keeps using this server rather than its own DNS over HTTPS${keyNote(r, 'special.firefox_canary')}.`;
    case 'android_probe':
      return `Allowed: Android's private DNS probe is always resolved, so phones keep using this server${keyNote(r, 'special.android_probes')}.`;
    case 'private_relay':
      return `Blocked: iCloud Private Relay's name, so Apple devices keep using this server${keyNote(r, 'special.block_private_relay')}.`;
    case 'ddr':
      return `Answered locally: the discovery question (DDR) gets this server's own encrypted addresses, never a public resolver's${keyNote(r, 'special.ddr')}.`;
    default:
      return null;
  }
}

/** Why the row was answered the way it was, as a sentence. */
export function explain(r: QueryRow): string {
  const known = reasonSentence(r);
  if (known) return known;
  const list = r.source ? `the list “${r.source}”` : 'a block list';
  if (r.action === 'block') return `Blocked${r.source ? ` by ${list}` : ''}.`;
  if (r.action === 'local') return 'Answered locally.';
  return reasonSentence({ ...r, reason: 'none' }) ?? 'No rule matched.';
}

/** Short status word for the row's badge. */
export function statusWord(r: QueryRow): string {
  if (r.action === 'block') return 'blocked';
  if (r.action === 'local' || r.reason === 'local_record') return 'local';
  if (r.cached) return 'cached';
  return r.action === 'allow' ? 'allowed' : 'forwarded';
}

/** A user rule: POST/DELETE /api/filter/rules {list, rule}. */
export interface Rule {
  list: 'allow' | 'deny';
  rule: string;
}

/** What one click does to the user rules: POST (add) or DELETE (remove) /api/filter/rules. */
export interface Change {
  op: 'add' | 'remove';
  rule: Rule;
}

/** The click a row offers: a blocked name gets an allow rule (an allow rule wins over lists
 * and deny rules alike); a name the user's own allow rule let through loses that rule (a deny
 * rule could not win over it); any other name gets a deny rule. */
export function changeFor(r: QueryRow): Change {
  const name = r.name.replace(/\.$/, '').toLowerCase();
  if (isBlocked(r)) return { op: 'add', rule: { list: 'allow', rule: name } };
  if (r.reason === 'user_allow' && r.source) return { op: 'remove', rule: { list: 'allow', rule: r.source } };
  return { op: 'add', rule: { list: 'deny', rule: name } };
}

/** Undo: the same rule, the other way. */
export function invert(c: Change): Change {
  return { op: c.op === 'add' ? 'remove' : 'add', rule: c.rule };
}

/** The button's text and its accessible name (which says which name or rule it acts on). */
export function buttonText(c: Change, r: QueryRow): { text: string; label: string } {
  if (c.op === 'remove') return { text: 'Remove rule', label: `Remove your allow rule ${c.rule.rule}` };
  return c.rule.list === 'allow'
    ? { text: 'Allow', label: `Allow ${r.name}` }
    : { text: 'Block', label: `Block ${r.name}` };
}

/** The notice once a change is made. */
export function changeText(c: Change): string {
  if (c.op === 'remove') return `Removed your ${c.rule.list} rule ${c.rule.rule}.`;
  return c.rule.list === 'allow'
    ? `Allowed ${c.rule.rule}: it resolves from now on.`
    : `Blocked ${c.rule.rule} from now on.`;
}

/** One SSE `data:` payload as a row; null for anything that is not one (keepalives are
 * comments and never reach here, but a malformed event must not break the view). */
export function parseLive(data: string): QueryRow | null {
  try {
    const o = JSON.parse(data) as Partial<QueryRow>;
    if (o && typeof o.name === 'string' && typeof o.ts === 'number' && typeof o.client === 'string') {
      return o as QueryRow;
    }
  } catch {
    /* fall through */
  }
  return null;
}

/** New rows first, at most max: the live view's list after a burst. */
export function pushLive(rows: QueryRow[], fresh: QueryRow[], max = LIVE_MAX): QueryRow[] {
  const merged = [...fresh].reverse().concat(rows);
  return merged.length > max ? merged.slice(0, max) : merged;
}

/** Does a live row pass the filter form (the same rules the server applies)? */
export function matches(r: QueryRow, f: Filter): boolean {
  if (f.client.trim() && r.client !== f.client.trim()) return false;
  if (f.name.trim() && !r.name.includes(f.name.trim().toLowerCase())) return false;
  if (f.from > 0 && r.ts < f.from) return false;
  if (f.to > 0 && r.ts >= f.to) return false;
  if (f.proto && r.proto !== f.proto) return false;
  switch (f.status) {
    case 'blocked':
      return r.action === 'block';
    case 'allowed':
      return r.action !== 'block';
    case 'cached':
      return r.cached;
    case 'local':
      return r.action === 'local';
    case 'forwarded':
      return r.action !== 'block' && r.action !== 'local' && !r.cached && !!r.upstream;
    default:
      return true;
  }
}

/** "HH:MM:SS" of an epoch-ms instant in the browser's time zone. */
export function timeOfDay(ms: number): string {
  const d = new Date(ms);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':');
}
