// The Rules page: the user's allow and deny rules (GET/POST/PUT/DELETE /api/filter/rules),
// listed, added, edited (one PUT: the server swaps the rule in one rewrite), removed. The server validates; its refusal
// is shown at the field (`rule`, `list`).
import { useEffect, useState } from 'preact/hooks';
import { Api, describe } from '../api';
import { locate } from '../forms';
import { RuleList, RuleRow, Rules as RulesView, editBody, ruleDeletePath, ruleRows, ruleScope } from '../rules';
import { Choice, Text, focusLater } from '../components/Inputs';
import './edit.css';

const FIELDS = ['rule', 'list'] as const;
type Errors = Partial<Record<'rule' | 'list' | 'form', string>>;

export function Rules({ api }: { api: Api }) {
  const [rules, setRules] = useState<RulesView | null>(null);
  const [loadErr, setLoadErr] = useState('');
  const [editing, setEditing] = useState<RuleRow | null>(null);
  const [list, setList] = useState<RuleList>('deny');
  const [rule, setRule] = useState('');
  const [errors, setErrors] = useState<Errors>({});
  const [busy, setBusy] = useState(false);
  const [saved, setSaved] = useState('');
  const [removing, setRemoving] = useState<string | null>(null);

  useEffect(() => {
    api.get<RulesView>('/api/filter/rules').then(setRules, (e) => setLoadErr(describe(e)));
  }, []);

  const fail = (e: unknown) => {
    const l = locate(e, list === 'allow' ? 'filter.allow' : 'filter.deny', FIELDS, 'rule');
    setErrors(l.field ? { [l.field]: l.message } : { form: l.message });
    if (l.field) focusLater(l.field === 'rule' ? 'rule-text' : 'rule-list');
  };

  const reset = () => {
    setEditing(null);
    setRule('');
    setErrors({});
  };

  const submit = async (ev: Event) => {
    ev.preventDefault();
    setBusy(true);
    setErrors({});
    setSaved('');
    try {
      if (editing) {
        const body = editBody(editing, { list, rule });
        if (body) setRules(await api.request<RulesView>('PUT', '/api/filter/rules', body));
        setSaved(`Saved the ${list} rule ${rule.trim()}.`);
      } else {
        setRules(await api.post<RulesView>('/api/filter/rules', { list, rule: rule.trim() }));
        setSaved(list === 'allow' ? `Added: ${rule.trim()} is always resolved.` : `Added: ${rule.trim()} is always blocked.`);
      }
      reset();
    } catch (e) {
      fail(e);
    } finally {
      setBusy(false);
    }
  };

  const remove = async (r: RuleRow) => {
    setSaved('');
    setErrors({});
    try {
      setRules(await api.request<RulesView>('DELETE', ruleDeletePath(r)));
      setSaved(`Removed the ${r.list} rule ${r.rule}.`);
      if (editing && editing.list === r.list && editing.rule === r.rule) reset();
      document.getElementById('rules-h')?.focus();
    } catch (e) {
      setErrors({ form: describe(e) });
    } finally {
      setRemoving(null);
    }
  };

  const startEdit = (r: RuleRow) => {
    setEditing(r);
    setList(r.list);
    setRule(r.rule);
    setErrors({});
    setSaved('');
    focusLater('rule-text');
  };

  const rows = rules ? ruleRows(rules) : [];
  return (
    <>
      <h1>Rules</h1>
      <section class="card" aria-labelledby="rules-h">
        <h2 id="rules-h" tabIndex={-1}>Your allow and deny rules</h2>
        <p class="muted">Allow rules win over deny rules and every list; deny rules block whatever the lists say.</p>
        {loadErr && <p class="error" role="alert">{loadErr}</p>}
        {rules === null && !loadErr && <p aria-live="polite">Loading…</p>}
        {rules !== null && rows.length === 0 && <p class="muted">No rules yet: add one below.</p>}
        <ul class="items" data-testid="rules">
          {rows.map((r) => {
            const key = `${r.list}:${r.rule}`;
            return (
              <li key={key} class="item" data-rule={r.rule} data-list={r.list}>
                <div class="what">
                  <strong><span class={`badge-${r.list}`}>{r.list}</span>{r.rule}</strong>
                  <p class="hint">{ruleScope(r.rule)}</p>
                </div>
                <div class="actions">
                  <button type="button" class="ghost" onClick={() => startEdit(r)} aria-label={`Edit ${r.list} rule ${r.rule}`}>Edit</button>
                  {removing === key ? (
                    <>
                      <button type="button" class="danger" onClick={() => void remove(r)}
                        aria-label={`Confirm: remove ${r.list} rule ${r.rule}`}>Confirm remove</button>
                      <button type="button" class="ghost" onClick={() => setRemoving(null)}>Keep</button>
                    </>
                  ) : (
                    <button type="button" class="ghost" onClick={() => setRemoving(key)}
                      aria-label={`Remove ${r.list} rule ${r.rule}`}>Remove</button>
                  )}
                </div>
              </li>
            );
          })}
        </ul>
        {saved && <p class="notice" role="status">{saved}</p>}
      </section>

      <section class="card" aria-labelledby="rule-form-h">
        <h2 id="rule-form-h">{editing ? `Edit the ${editing.list} rule ${editing.rule}` : 'Add a rule'}</h2>
        <form class="edit-form" onSubmit={submit} noValidate>
          <Choice id="rule-list" label="Kind" value={list} choices={['deny', 'allow']} error={errors.list}
            hint="deny: always blocked; allow: always resolved." onChange={(v) => setList(v as RuleList)} />
          <Text id="rule-text" label="Rule" value={rule} error={errors.rule} onInput={setRule}
            hint={<>A name (<code>ads.example.com</code>: that name only), <code>*.example.com</code> (every name below it) or <code>/regex/</code>.</>} />
          {errors.form && <p class="error" role="alert">{errors.form}</p>}
          <div class="actions">
            <button type="submit" disabled={busy}>{editing ? 'Save rule' : 'Add rule'}</button>
            {editing && <button type="button" class="ghost" onClick={reset}>Cancel</button>}
          </div>
        </form>
      </section>
    </>
  );
}
