// The Local records page: names this box answers itself (GET/POST /api/local-records, PUT
// /api/local-records?name&type&value, DELETE /api/local-records/<index>). An edit is one PUT:
// the server swaps the record in one rewrite, so a record it refuses leaves the old one in
// place. The loader validates; its refusal is shown at the field.
import { useEffect, useState } from 'preact/hooks';
import { Api, describe } from '../api';
import { locate } from '../forms';
import { LOCAL_FIELDS, LocalForm, LocalRecord, RR_TYPES, emptyLocal, localBody, localEditPath, localForm, sameRecord } from '../config';
import { Choice, Text, focusLater } from '../components/Inputs';
import './edit.css';

type Errors = Partial<Record<'name' | 'type' | 'value' | 'ttl' | 'form', string>>;
const IDS: Record<string, string> = { name: 'local-name', type: 'local-type', value: 'local-value', ttl: 'local-ttl' };
const VALUE_HINT: Record<string, string> = {
  A: 'An IPv4 address, e.g. 192.168.1.10.',
  AAAA: 'An IPv6 address, e.g. fd00::10.',
  CNAME: 'The name this one is an alias of.',
  TXT: 'The text.',
  PTR: 'The name the address points to.',
};
type View = { local_records: LocalRecord[] };

export function LocalRecords({ api }: { api: Api }) {
  const [records, setRecords] = useState<LocalRecord[] | null>(null);
  const [loadErr, setLoadErr] = useState('');
  const [editing, setEditing] = useState<LocalRecord | null>(null);
  const [form, setForm] = useState<LocalForm>(emptyLocal());
  const [errors, setErrors] = useState<Errors>({});
  const [busy, setBusy] = useState(false);
  const [saved, setSaved] = useState('');
  const [removing, setRemoving] = useState<number | null>(null);

  useEffect(() => {
    api.get<View>('/api/local-records').then((r) => setRecords(r.local_records), (e) => setLoadErr(describe(e)));
  }, []);

  const reset = () => {
    setEditing(null);
    setForm(emptyLocal());
    setErrors({});
  };

  const submit = async (ev: Event) => {
    ev.preventDefault();
    setBusy(true);
    setErrors({});
    setSaved('');
    try {
      const body = localBody(form);
      if (editing && sameRecord(editing, form)) {
        reset();
        return;
      }
      const r = editing
        ? await api.request<View>('PUT', localEditPath(editing), body)
        : await api.post<View>('/api/local-records', body);
      setRecords(r.local_records);
      setSaved(editing ? `Saved the ${body.type as string} record of ${body.name as string}.`
        : `Added: ${body.name as string} answers ${body.value as string}.`);
      reset();
    } catch (e) {
      const l = locate(e, 'local_records', LOCAL_FIELDS, null);
      setErrors(l.field ? { [l.field]: l.message } : { form: l.message });
      if (l.field) focusLater(IDS[l.field]);
    } finally {
      setBusy(false);
    }
  };

  const remove = async (rec: LocalRecord) => {
    setSaved('');
    setErrors({});
    try {
      const r = await api.request<View>('DELETE', `/api/local-records/${rec.index}`);
      setRecords(r.local_records);
      setSaved(`Removed the ${rec.type} record of ${rec.name}.`);
      if (editing && editing.index === rec.index) reset();
      document.getElementById('locals-h')?.focus();
    } catch (e) {
      setErrors({ form: describe(e) });
    } finally {
      setRemoving(null);
    }
  };

  const startEdit = (rec: LocalRecord) => {
    setEditing(rec);
    setForm(localForm(rec));
    setErrors({});
    setSaved('');
    focusLater('local-value');
  };

  return (
    <>
      <h1>Local records</h1>
      <section class="card" aria-labelledby="locals-h">
        <h2 id="locals-h" tabIndex={-1}>Names answered by this box</h2>
        <p class="muted">Local names (a NAS, a printer) answered here, before any list or upstream.</p>
        {loadErr && <p class="error" role="alert">{loadErr}</p>}
        {records === null && !loadErr && <p aria-live="polite">Loading…</p>}
        {records !== null && records.length === 0 && <p class="muted">No local records yet: add one below.</p>}
        <ul class="items" data-testid="local-records">
          {(records ?? []).map((rec) => (
            <li key={rec.index} class="item" data-record={rec.name} data-type={rec.type}>
              <div class="what">
                <strong>{rec.name}</strong>
                <p class="hint">{rec.type} {rec.value ?? ''} · TTL {rec.ttl} s</p>
              </div>
              <div class="actions">
                <button type="button" class="ghost" onClick={() => startEdit(rec)}
                  aria-label={`Edit ${rec.type} record of ${rec.name}`}>Edit</button>
                {removing === rec.index ? (
                  <>
                    <button type="button" class="danger" onClick={() => void remove(rec)}
                      aria-label={`Confirm: remove ${rec.type} record of ${rec.name}`}>Confirm remove</button>
                    <button type="button" class="ghost" onClick={() => setRemoving(null)}>Keep</button>
                  </>
                ) : (
                  <button type="button" class="ghost" onClick={() => setRemoving(rec.index)}
                    aria-label={`Remove ${rec.type} record of ${rec.name}`}>Remove</button>
                )}
              </div>
            </li>
          ))}
        </ul>
        {saved && <p class="notice" role="status">{saved}</p>}
      </section>

      <section class="card" aria-labelledby="local-form-h">
        <h2 id="local-form-h">{editing ? `Edit the ${editing.type} record of ${editing.name}` : 'Add a record'}</h2>
        <form class="edit-form" onSubmit={submit} noValidate>
          <Text id="local-name" label="Name" value={form.name} error={errors.name}
            hint="e.g. nas.home.arpa" onInput={(v) => setForm({ ...form, name: v })} />
          <Choice id="local-type" label="Type" value={form.type} choices={RR_TYPES} error={errors.type}
            onChange={(v) => setForm({ ...form, type: v })} />
          <Text id="local-value" label="Value" value={form.value} error={errors.value}
            hint={VALUE_HINT[form.type]} onInput={(v) => setForm({ ...form, value: v })} />
          <Text id="local-ttl" label="TTL (seconds, optional)" value={form.ttl} error={errors.ttl} optional
            inputMode="numeric" hint="Empty: the default." onInput={(v) => setForm({ ...form, ttl: v })} />
          {errors.form && <p class="error" role="alert">{errors.form}</p>}
          <div class="actions">
            <button type="submit" disabled={busy}>{editing ? 'Save record' : 'Add record'}</button>
            {editing && <button type="button" class="ghost" onClick={reset}>Cancel</button>}
          </div>
        </form>
      </section>
    </>
  );
}
