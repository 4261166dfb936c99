// The Rules page's logic (tests/ui/unit/rules.test.ts): the user's allow and deny rules
// (GET/POST/PUT/DELETE /api/filter/rules) as rows, what each rule matches in words, and the
// calls an edit makes.

export type RuleList = 'allow' | 'deny';
export interface Rules { allow: string[]; deny: string[] }
export interface RuleRow { list: RuleList; rule: string }

/** Both lists as rows: allow first (it wins), each in the server's order. */
export function ruleRows(r: Rules): RuleRow[] {
  return [
    ...r.allow.map((rule) => ({ list: 'allow' as const, rule })),
    ...r.deny.map((rule) => ({ list: 'deny' as const, rule })),
  ];
}

/** What a rule matches, as the loader reads it (docs/configuration.md, filter.allow). */
export function ruleScope(rule: string): string {
  if (rule.length > 1 && rule.startsWith('/') && rule.endsWith('/')) return 'names matching the regular expression';
  if (rule.startsWith('*.')) return `every name below ${rule.slice(2)}, not ${rule.slice(2)} itself`;
  return 'this name only';
}

/** DELETE path for one rule: the rule url-encoded (a regex may hold '/'). */
export function ruleDeletePath(r: RuleRow): string {
  return `/api/filter/rules/${r.list}/${encodeURIComponent(r.rule)}`;
}

/** The rule as the loader keeps it: names lower case without a trailing dot, regexes as is. */
export function normalise(rule: string): string {
  const t = rule.trim();
  if (t.startsWith('/')) return t;
  const l = t.toLowerCase();
  return l.length > 1 && l.endsWith('.') ? l.slice(0, -1) : l;
}

/** The body of PUT /api/filter/rules for an edit. */
export interface RuleEdit { list: RuleList; rule: string; new_rule?: string; new_list?: RuleList }

/**
 * The one request an edit makes (PUT /api/filter/rules: the server replaces the rule in one
 * rewrite, so a new rule it refuses leaves the old one, and the rule's groups stay as they
 * were). Only what changed is sent; an edit that changes nothing makes no call (null).
 */
export function editBody(old: RuleRow, next: RuleRow): RuleEdit | null {
  const rule = next.rule.trim();
  const sameRule = normalise(rule) === normalise(old.rule);
  if (next.list === old.list && sameRule) return null;
  const b: RuleEdit = { list: old.list, rule: old.rule };
  if (!sameRule) b.new_rule = rule;
  if (next.list !== old.list) b.new_list = next.list;
  return b;
}
