// What every edit form shares (rules, groups, clients, local records, settings): reading a list
// typed into a field, and finding which field a server refusal belongs to. Unit-tested in
// tests/ui/unit/forms.test.ts.
import { ApiError, describe } from './api';

/** "a, b\nc" -> ["a", "b", "c"]: split on commas, spaces and new lines; no empties, no repeats. */
export function splitList(text: string): string[] {
  const out: string[] = [];
  for (const s of text.split(/[\s,]+/)) {
    if (s && !out.includes(s)) out.push(s);
  }
  return out;
}

/** One entry per line, trimmed, empty lines dropped (entries may hold spaces or commas). */
export function splitLines(text: string): string[] {
  return text.split('\n').map((s) => s.trim()).filter(Boolean);
}

export interface Located {
  field: string | null; // a form field, or null: a form-level message
  message: string;
}

/**
 * Where a refusal belongs. A route names its own fields (`name`, `rule`, `index`, ...) in
 * `field`; a refusal by the config loader comes as `invalid_setting` with the whole key
 * (`clients`) as the field and a message labelled with the path inside it
 * (`clients[0].ids[1]: bad address ...`, `groups.kids.sources[0]: ...`): the last name of that
 * path that is one of `fields` is the field, and an index after it says which entry
 * ("entry 2: ..."). The label names the key in the file, not anything on the form, so it is
 * dropped from the message. `key` is the config key the form edits; a refusal naming it
 * without a field of the form goes to `fallback`.
 */
export function locate(e: unknown, key: string, fields: readonly string[], fallback: string | null): Located {
  const text = describe(e);
  if (!(e instanceof ApiError)) return { field: null, message: text };
  if (e.field && e.field !== key && fields.includes(e.field)) {
    return { field: e.field, message: stripLabel(text, key).message };
  }
  const lab = stripLabel(text, key);
  if (lab.path === null) {
    return { field: e.field === key ? fallback : null, message: text };
  }
  // the path after the key: ".name", "[3]" tokens
  const tokens = [...lab.path.matchAll(/\[(\d+)\]|\.([A-Za-z0-9_-]+)/g)];
  let field: string | null = null;
  let entry: number | null = null;
  tokens.forEach((t, i) => {
    if (t[2] !== undefined && fields.includes(t[2])) {
      field = t[2];
      const next = tokens[i + 1];
      entry = next && next[1] !== undefined ? Number(next[1]) : null;
    }
  });
  if (field === null && fields.includes(key)) {
    // a settings field is the key itself: "upstream.servers[1]: ..."
    field = key;
    entry = tokens[0] && tokens[0][1] !== undefined ? Number(tokens[0][1]) : null;
  }
  const message = entry !== null ? `Entry ${entry + 1}: ${lab.message}` : lab.message;
  return { field: field ?? fallback, message };
}

/** "key[0].ids[1]: text" -> the path after the key ("[0].ids[1]") and the text; else path null. */
function stripLabel(text: string, key: string): { path: string | null; message: string } {
  if (!text.startsWith(key)) return { path: null, message: text };
  const rest = text.slice(key.length);
  const m = /^((?:\[\d+\]|\.[A-Za-z0-9_-]+)*): /.exec(rest);
  if (!m) return { path: null, message: text };
  return { path: m[1], message: rest.slice(m[0].length) };
}
