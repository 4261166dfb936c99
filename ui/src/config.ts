// The Groups, Clients and Local records pages' logic (tests/ui/unit/config.test.ts): the views
// GET /api/groups, /api/clients and /api/local-records answer, the bodies their forms send, and
// how a local record is found again after an edit. Validation is the server's (the config
// loader's): the pages send what was typed and show the refusal at its field (forms.locate).
import { splitList } from './forms';

/* ---- groups ---------------------------------------------------------------------------------- */

export interface Group {
  name: string;
  sources: string[];           // as written in the file
  filtering: boolean;
  effective_sources: string[]; // the sources that apply: these plus those naming the group
}

export interface GroupForm { name: string; sources: string[]; filtering: boolean }

export const GROUP_FIELDS = ['name', 'sources', 'filtering'] as const;

export function emptyGroup(): GroupForm {
  return { name: '', sources: [], filtering: true };
}

export function groupForm(g: Group): GroupForm {
  return { name: g.name, sources: [...g.sources], filtering: g.filtering };
}

/** POST (add: name in the body) or PUT /api/groups/<name> body (edit: name in the path). */
export function groupBody(f: GroupForm, edit: boolean): Record<string, unknown> {
  const b: Record<string, unknown> = edit ? {} : { name: f.name.trim() };
  b.sources = f.sources;
  b.filtering = f.filtering;
  return b;
}

/** A checkbox list's new value: `name` added or removed, the order of `all` kept. */
export function toggle(list: string[], name: string, on: boolean, all: string[]): string[] {
  const set = new Set(list);
  if (on) set.add(name);
  else set.delete(name);
  const known = all.filter((n) => set.has(n));
  return [...known, ...list.filter((n) => set.has(n) && !all.includes(n))];
}

/* ---- clients --------------------------------------------------------------------------------- */

export interface Client { name: string; ids: string[]; groups: string[] }
export interface ClientForm { name: string; ids: string; groups: string[] }

export const CLIENT_FIELDS = ['name', 'ids', 'groups'] as const;

export function emptyClient(): ClientForm {
  return { name: '', ids: '', groups: [] };
}

export function clientForm(c: Client): ClientForm {
  return { name: c.name, ids: c.ids.join('\n'), groups: [...c.groups] };
}

/**
 * The client body: ids one per line or comma-separated (addresses, prefixes, `id:<client id>`).
 * No groups means the default group; an edit merges into the entry, so there it must say so.
 */
export function clientBody(f: ClientForm, edit: boolean): Record<string, unknown> {
  const b: Record<string, unknown> = edit ? {} : { name: f.name.trim() };
  b.ids = splitList(f.ids);
  if (f.groups.length) b.groups = f.groups;
  else if (edit) b.groups = ['default'];
  return b;
}

/** What an id is, in words. */
export function idText(id: string): string {
  if (id.startsWith('id:')) return `DoH/DoT client id ${id.slice(3)}`;
  return id.includes('/') ? `addresses in ${id}` : id;
}

/* ---- local records --------------------------------------------------------------------------- */

export const RR_TYPES = ['A', 'AAAA', 'CNAME', 'TXT', 'PTR'] as const; // src/admin/api_config.c

export interface LocalRecord { name: string; type: string; value: string | null; ttl: number; index: number }
export interface LocalForm { name: string; type: string; value: string; ttl: string }

export const LOCAL_FIELDS = ['name', 'type', 'value', 'ttl'] as const;

export function emptyLocal(): LocalForm {
  return { name: '', type: 'A', value: '', ttl: '' };
}

export function localForm(r: LocalRecord): LocalForm {
  return { name: r.name, type: r.type, value: r.value ?? '', ttl: String(r.ttl) };
}

/**
 * The POST body. An empty TTL is left to the loader's default; digits are a number; anything
 * else is sent as typed so the server's refusal (a ttl must be an integer) is what the field
 * shows, not a check of our own.
 */
export function localBody(f: LocalForm): Record<string, unknown> {
  const b: Record<string, unknown> = { name: f.name.trim(), type: f.type, value: f.value.trim() };
  const t = f.ttl.trim();
  if (t) b.ttl = /^\d+$/.test(t) ? Number(t) : t;
  return b;
}

/**
 * PUT's address for changing a record: the record named as the server names it, by name and
 * type and its value (several records may share a name and type). The server changes it in one
 * rewrite, so a new record it refuses leaves the old one.
 */
export function localEditPath(r: { name: string; type: string; value: string | null }): string {
  const q = new URLSearchParams({ name: r.name, type: r.type });
  if (r.value !== null) q.set('value', r.value);
  return `/api/local-records?${q.toString()}`;
}

/** Does the form describe exactly this record (then an edit has nothing to do)? */
export function sameRecord(r: LocalRecord, f: LocalForm): boolean {
  const b = localBody(f);
  const norm = (n: string) => n.toLowerCase().replace(/\.$/, '');
  return norm(String(b.name)) === norm(r.name) && b.type === r.type && b.value === r.value &&
    (b.ttl === undefined || b.ttl === r.ttl);
}
