// The Lists page's logic, kept out of the components so it is unit-tested
// (tests/ui/unit/lists.test.ts): the source form's body, which field a server refusal belongs
// to, what the status says in words, and how far a refresh round has got.
import { ApiError } from './api';

/** The formats the config loader accepts (src/conf/filter.c). */
export const FORMATS = ['auto', 'hosts', 'domains', 'adblock', 'wildcard'] as const;

export interface SkipReason { count: number; first_lines: number[]; help: string }

/** One row of GET /api/filter/sources (src/daemon/admin_glue.c + skipped_by_reason). */
export interface Source {
  name: string;
  url?: string;
  path?: string;
  format: string;
  groups: string[];
  enabled: boolean;
  list?: number;
  wild?: number;
  allow?: number;
  skipped?: number;
  fetched_at?: number;  // epoch seconds, 0 never
  compiled_at?: number; // epoch seconds, 0 never
  last_error?: string;
  errors?: number;
  kept_previous?: number;
  skipped_by_reason?: Record<string, SkipReason>;
  hosts_answers?: 'null' | 'listed'; // effective: the loader's default when the file is silent
  subdomains?: boolean;
}

export type FieldName = 'name' | 'url' | 'path' | 'format' | 'groups' | 'hosts_answers' | 'subdomains';
const FIELDS: readonly string[] = ['name', 'url', 'path', 'format', 'groups', 'hosts_answers', 'subdomains'];

/** What a hosts line with a real address does (per-source `hosts_answers`); 'default' leaves
 * the key out, so the loader's default applies: `listed` for a file, `null` for a URL (a
 * downloaded list must not redirect names to its own addresses unless the person says so). */
export type HostsAnswers = 'default' | 'null' | 'listed';
export const HOSTS_ANSWERS: readonly { value: HostsAnswers; text: string }[] = [
  { value: 'default', text: 'Default: answer for a file, block for a URL' },
  { value: 'listed', text: 'Answer with the listed address' },
  { value: 'null', text: 'Block the name (the address is ignored)' },
];

/** The source's options in words for its status line; empty when there is nothing to say. */
export function optionsText(s: Source): string {
  const out: string[] = [];
  if (s.subdomains) out.push('entries cover their subdomains');
  if (s.hosts_answers === 'listed' && (s.format === 'hosts' || s.format === 'auto')) out.push('hosts addresses answered');
  return out.join(' · ');
}

export interface Form {
  name: string;
  kind: 'url' | 'path';
  location: string; // the URL or the path
  format: string;
  groups: string;   // comma or space separated group names
  enabled: boolean;
  hostsAnswers: HostsAnswers;
  subdomains: boolean;
  was: { hostsAnswers: HostsAnswers; subdomains: boolean }; // as loaded: an edit sends changes only
}

export function emptyForm(): Form {
  return {
    name: '', kind: 'url', location: '', format: 'auto', groups: '', enabled: true,
    hostsAnswers: 'default', subdomains: false, was: { hostsAnswers: 'default', subdomains: false },
  };
}

export function formOf(s: Source): Form {
  return {
    name: s.name,
    kind: s.path !== undefined && s.url === undefined ? 'path' : 'url',
    location: s.url ?? s.path ?? '',
    format: s.format || 'auto',
    groups: (s.groups ?? []).join(', '),
    enabled: s.enabled,
    hostsAnswers: s.hosts_answers ?? 'default',
    subdomains: s.subdomains === true,
    was: { hostsAnswers: s.hosts_answers ?? 'default', subdomains: s.subdomains === true },
  };
}

/** "a, b c" -> ["a", "b", "c"]: no empties, no repeats. */
export function parseGroups(text: string): string[] {
  const out: string[] = [];
  for (const g of text.split(/[\s,]+/)) {
    if (g && !out.includes(g)) out.push(g);
  }
  return out;
}

/**
 * The POST (add) or PUT (edit: the name is in the path, not the body) body. Validation is the
 * server's: the page sends what was typed and shows the refusal at its field.
 */
export function sourceBody(f: Form, edit: boolean): Record<string, unknown> {
  const b: Record<string, unknown> = {};
  if (!edit) b.name = f.name.trim();
  b[f.kind] = f.location.trim();
  b.format = f.format;
  // The loader wants 1..64 groups and reads a missing key as ["default"]; an edit merges into
  // the entry, so there an empty field must say "default" to drop the groups it had.
  const groups = parseGroups(f.groups);
  if (groups.length) b.groups = groups;
  else if (edit) b.groups = ['default'];
  b.enabled = f.enabled;
  // Only what the person changed, so a file that never named these keys does not grow them.
  // `null` is JSON null, which the loader reads as YAML's null.
  if (f.hostsAnswers !== 'default' && f.hostsAnswers !== f.was.hostsAnswers) {
    b.hosts_answers = f.hostsAnswers === 'null' ? null : f.hostsAnswers;
  }
  if (edit ? f.subdomains !== f.was.subdomains : f.subdomains) b.subdomains = f.subdomains;
  return b;
}

/**
 * Which form field a refusal belongs to. The source routes name their own fields (`url`,
 * `path`, `name`); a refusal by the config loader comes as `invalid_setting` with the field
 * `filter.sources` and a message naming `filter.sources[i].<field>`: that field, else the
 * location (URL/path) since it is what a person most often gets wrong. null: a form-level
 * message (no field, or a field this form does not have).
 */
export function errorField(e: unknown, kind: 'url' | 'path'): FieldName | null {
  if (!(e instanceof ApiError)) return null;
  const loc: FieldName = kind;
  if (e.field && FIELDS.includes(e.field)) {
    return e.field === 'url' || e.field === 'path' ? loc : (e.field as FieldName);
  }
  if (e.field === 'filter.sources' || /filter\.sources/.test(e.message)) {
    const m = /filter\.sources\[\d+\]\.(\w+)/.exec(e.message);
    if (m && FIELDS.includes(m[1])) {
      return m[1] === 'url' || m[1] === 'path' ? loc : (m[1] as FieldName);
    }
    return e.field === 'filter.sources' ? loc : null;
  }
  return null;
}

/**
 * The loader's message as shown at its field: without the "filter.sources[1].url: " label,
 * which names the key in the file, not anything on the form.
 */
export function fieldMessage(message: string): string {
  return message.replace(/^filter\.sources\[\d+\](\.\w+(\[\d+\])?)?: /, '');
}

/** Names the list blocks: exact names plus wildcard entries (allow entries are exceptions). */
export function entries(s: Source): number {
  return (s.list ?? 0) + (s.wild ?? 0);
}

/** "3 min ago" for an epoch-seconds instant, "never" for 0. `nowMs` is the caller's clock. */
export function ago(epochS: number | undefined, nowMs: number): string {
  if (!epochS) return 'never';
  const s = Math.max(0, Math.round(nowMs / 1000 - epochS));
  if (s < 60) return s <= 1 ? 'just now' : `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

export interface SkipRow { reason: string; count: number; help: string; lines: string }

/** The skip report as rows, most frequent reason first; lines as "3, 7, 12" ("…" if more). */
export function skipRows(s: Source): SkipRow[] {
  const by = s.skipped_by_reason ?? {};
  return Object.entries(by)
    .map(([reason, r]) => ({
      reason: reason.replace(/_/g, ' '),
      count: r.count,
      help: r.help,
      lines: r.first_lines.join(', ') + (r.count > r.first_lines.length ? ', …' : ''),
    }))
    .sort((a, b) => b.count - a.count || a.reason.localeCompare(b.reason));
}

/* ---- refresh progress ------------------------------------------------------------------------ */

export type Phase = 'waiting' | 'updated' | 'failed';

/** What a source's status was when the round started. */
export interface Mark { fetched_at: number; compiled_at: number; errors: number }

export function markOf(list: Source[]): Record<string, Mark> {
  const m: Record<string, Mark> = {};
  for (const s of list) {
    m[s.name] = { fetched_at: s.fetched_at ?? 0, compiled_at: s.compiled_at ?? 0, errors: s.errors ?? 0 };
  }
  return m;
}

/**
 * Where each source is in the round, judged against the marks taken before it started: an
 * error counted since is "failed", a newer download or compile "updated", else "waiting" (the
 * API has no per-round state: a list the server finds unchanged stays "waiting" until the
 * caller gives up, which the page reports as unchanged). Only enabled URL sources take part:
 * a round downloads those; a file source is re-read only when it changed, so it has no "done".
 */
export function progress(before: Record<string, Mark>, now: Source[]): Record<string, Phase> {
  const out: Record<string, Phase> = {};
  for (const s of now) {
    if (!s.enabled || !s.url) continue;
    const b = before[s.name] ?? { fetched_at: 0, compiled_at: 0, errors: 0 };
    if ((s.errors ?? 0) > b.errors) out[s.name] = 'failed';
    else if ((s.fetched_at ?? 0) > b.fetched_at || (s.compiled_at ?? 0) > b.compiled_at) out[s.name] = 'updated';
    else out[s.name] = 'waiting';
  }
  return out;
}

/** Finished sources and the total, for the progress bar. */
export function doneCount(p: Record<string, Phase>): { done: number; total: number } {
  const v = Object.values(p);
  return { done: v.filter((x) => x !== 'waiting').length, total: v.length };
}

/* ---- lookup ---------------------------------------------------------------------------------- */

export interface Lookup { name: string; action: string; reason: string; matched: string; source: string }

/** The record types the lookup offers (the server takes any mnemonic it knows or a number). */
export const LOOKUP_TYPES = ['A', 'AAAA', 'HTTPS', 'CNAME', 'MX', 'TXT', 'PTR', 'SRV', 'ANY'] as const;

/** GET /api/lookup's query: name and type always, client and client_id when given. */
export function lookupQuery(name: string, type: string, client: string, clientId: string): string {
  const q = new URLSearchParams({ name: name.trim(), type: type || 'A' });
  if (client.trim()) q.set('client', client.trim());
  if (clientId.trim()) q.set('client_id', clientId.trim());
  return `/api/lookup?${q.toString()}`;
}

/** Every reason of src/filter/result.h in words (tests/ui/unit/reasons.test.ts reads the
 * header and fails on one missing here). */
export const LOOKUP_REASONS: Readonly<Record<string, string>> = {
  none: 'no list or rule matches it',
  paused: 'filtering is paused',
  local_record: 'a local record answers it',
  user_allow: 'a user allow rule matches it',
  user_deny: 'a user deny rule matches it',
  blocklist_exception: 'an exception entry in a list allows it',
  blocklist_domain: 'a list names it',
  blocklist_wildcard: 'a list blocks it and its subdomains',
  blocklist_rule: 'a list rule with modifiers or a pattern matches it',
  blocklist_rewrite: 'a $dnsrewrite rule in a list sets its answer',
  blocklist_hosts: 'a hosts list gives it an address, which is the answer',
  special_localhost: 'a localhost name always answers with the loopback address',
  special_use_name: 'a special-use name (local, invalid, home.arpa) is answered here, never forwarded',
  single_label: 'a single-label name is a local name, answered here, never forwarded',
  private_reverse: 'the reverse name of a private address is answered here, never forwarded',
  firefox_canary: "Firefox's canary name is blocked so Firefox keeps using this server",
  android_probe: "Android's private DNS probe is always resolved",
  private_relay: "iCloud Private Relay's name is blocked so Apple devices keep using this server",
  ddr: "the discovery question (DDR) is answered with this server's own encrypted addresses",
};

const SPECIAL: Readonly<Record<string, true>> = {
  special_localhost: true, special_use_name: true, single_label: true, private_reverse: true,
  firefox_canary: true, android_probe: true, private_relay: true, ddr: true,
};

/** The lookup's answer as one sentence; `type`, the record type asked about, is said unless
 * it is the plain address question (A). */
export function lookupText(r: Lookup, type = 'A'): string {
  const verb = r.action === 'block' ? 'Blocked' : r.action === 'local' ? 'Answered locally' : 'Allowed';
  const why = LOOKUP_REASONS[r.reason] ?? r.reason.replace(/_/g, ' ');
  let s = type !== 'A' ? `${verb} for ${type}: ${why}` : `${verb}: ${why}`;
  // a special-use name's source is the `special.*` key that decides it, not a list
  // a special-use name's source is the `special.*` key that decides it, a user rule's is the
  // rule's text: neither is a list
  if (r.source) {
    s += r.source.startsWith('special.') && r.reason in SPECIAL ? ` (setting ${r.source}`
      : r.reason === 'user_allow' || r.reason === 'user_deny' ? ` (rule “${r.source}”`
      : ` (list “${r.source}”`;
  }
  if (r.matched && r.matched !== r.name) s += `${r.source ? ', ' : ' ('}entry ${r.matched}`;
  if (r.source || (r.matched && r.matched !== r.name)) s += ')';
  return s + '.';
}
