// The Settings page, drawn from GET /api/schema (settings.ts): one form per part of the schema
// (upstream, blocking, cache, ...), each field from its row. Save sends the section's changed
// keys to PUT /api/settings; a refusal names its key and is shown at that field; the answer's
// restart_required is said plainly, since those keys keep their old value until a restart.
import { useEffect, useState } from 'preact/hooks';
import { Api, ApiError, describe } from '../api';
import { locate } from '../forms';
import {
  Draft, SchemaKey, Section, applyText, changes, docParts, draftOf, inputId, labelOf, restartNote,
  sections, widgetOf,
} from '../settings';
import { Check, Choice, Lines, Text, focusLater } from '../components/Inputs';
import { Replica, SyncStatus, replicaText, sortReplicas } from '../sync';
import './edit.css';

type Values = Record<string, unknown>;
interface Note { section: string; text: string; restart: boolean }

export function Settings({ api }: { api: Api }) {
  const [keys, setKeys] = useState<SchemaKey[] | null>(null);
  const [values, setValues] = useState<Values>({});
  const [draft, setDraft] = useState<Draft>({});
  const [loadErr, setLoadErr] = useState('');
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [note, setNote] = useState<Note | null>(null);
  const [busy, setBusy] = useState<string | null>(null);

  useEffect(() => {
    Promise.all([api.get<{ keys: SchemaKey[] }>('/api/schema'), api.get<{ settings: Values }>('/api/settings')])
      .then(([s, v]) => {
        setKeys(s.keys);
        setValues(v.settings);
        setDraft(draftOf(s.keys.filter((k) => k.editable), v.settings));
      }, (e) => setLoadErr(describe(e)));
  }, []);

  const save = async (sec: Section, ev: Event) => {
    ev.preventDefault();
    setErrors({});
    setNote(null);
    const ch = changes(sec.keys, values, draft);
    if (!Object.keys(ch).length) {
      setNote({ section: sec.id, text: 'Nothing changed.', restart: false });
      return;
    }
    setBusy(sec.id);
    try {
      const r = await api.request<{ settings: Values; restart_required?: string[] }>('PUT', '/api/settings', { settings: ch });
      setValues(r.settings);
      // the saved keys take the server's spelling; what the person is typing elsewhere stays
      setDraft({ ...draft, ...draftOf(sec.keys, r.settings) });
      const restart = restartNote(r.restart_required ?? []);
      setNote({ section: sec.id, text: restart ?? 'Saved: in effect now.', restart: restart !== null });
    } catch (e) {
      const field = e instanceof ApiError ? e.field : undefined;
      const key = field && sec.keys.some((k) => k.path === field) ? field : null;
      if (key) {
        const l = locate(e, key, [key], key);
        setErrors({ [key]: l.message });
        focusLater(inputId(key));
      } else {
        setErrors({ [`form-${sec.id}`]: describe(e) });
      }
    } finally {
      setBusy(null);
    }
  };

  if (loadErr) return (<><h1>Settings</h1><p class="error" role="alert">{loadErr}</p></>);
  if (!keys) return (<><h1>Settings</h1><p aria-live="polite">Loading…</p></>);

  const set = (path: string, v: string | boolean) => setDraft({ ...draft, [path]: v });
  return (
    <>
      <h1>Settings</h1>
      <p class="muted">Saved into the config file. Each setting says when a change applies.</p>
      {sections(keys).map((sec) => (
        <section class="card" aria-labelledby={`sec-${sec.id}-h`} key={sec.id} data-section={sec.id}>
          <h2 id={`sec-${sec.id}-h`}>{sec.title}</h2>
          <form class="edit-form" onSubmit={(ev) => void save(sec, ev)} noValidate>
            {sec.keys.map((k) => (
              <SettingField k={k} key={k.path} value={draft[k.path]} error={errors[k.path]} onChange={(v) => set(k.path, v)} />
            ))}
            {errors[`form-${sec.id}`] && <p class="error" role="alert">{errors[`form-${sec.id}`]}</p>}
            <div class="actions">
              <button type="submit" disabled={busy !== null} aria-label={`Save ${sec.title}`}>Save</button>
            </div>
            {note && note.section === sec.id && (
              <p class={note.restart ? 'restart-note' : 'notice'} role="status" data-testid={`note-${sec.id}`}>{note.text}</p>
            )}
          </form>
        </section>
      ))}
      <Replicas api={api} />
    </>
  );
}

/* On a primary: the replicas that pull from it (GET /api/sync/replicas, the last pull each
 * token made). A replica itself says so in the banner instead; a server no replica has pulled
 * from yet says that. */
function Replicas({ api }: { api: Api }) {
  const [list, setList] = useState<Replica[] | null>(null);
  const [replica, setReplica] = useState(false);
  const [err, setErr] = useState('');
  useEffect(() => {
    Promise.all([api.get<SyncStatus>('/api/sync/status'), api.get<{ replicas: Replica[] }>('/api/sync/replicas')])
      .then(([st, r]) => { setReplica(st.replica); setList(sortReplicas(r.replicas)); }, (e) => setErr(describe(e)));
  }, []);
  if (replica) return null;
  const now = Date.now();
  return (
    <section class="card" aria-labelledby="sec-replicas-h" data-section="replicas">
      <h2 id="sec-replicas-h">Replicas</h2>
      {err && <p class="error" role="alert">{err}</p>}
      {list && !list.length && (
        <p class="muted">No replica has pulled from this server yet. A replica names this server in its <code>sync.primary</code> and pulls with a read token of <code>admin.tokens</code>.</p>
      )}
      {list && list.length > 0 && (
        <ul class="replicas" data-testid="replicas">
          {list.map((r) => (
            <li key={r.token}><strong>{r.token}</strong> from {r.address}: {replicaText(r, now)}</li>
          ))}
        </ul>
      )}
    </section>
  );
}

function Doc({ doc }: { doc: string }) {
  return <>{docParts(doc).map((p, i) => (p.code ? <code key={i}>{p.text}</code> : p.text))}</>;
}

function SettingField({ k, value, error, onChange }: { k: SchemaKey; value: string | boolean | undefined; error?: string; onChange: (v: string | boolean) => void }) {
  const id = inputId(k.path);
  const w = widgetOf(k);
  const hint = `${k.path} · ${k.range ? `${k.range} · ` : ''}${applyText(k)}`;
  let input;
  if (w === 'bool') {
    input = <Check id={id} label={labelOf(k)} checked={Boolean(value)} error={error} hint={hint} onChange={onChange} />;
  } else if (w === 'choice') {
    input = <Choice id={id} label={labelOf(k)} value={String(value ?? '')} choices={k.choices ?? []} error={error} hint={hint} onChange={onChange} />;
  } else if (w === 'lines') {
    input = <Lines id={id} label={labelOf(k)} value={String(value ?? '')} error={error} onInput={onChange}
      hint={`${hint} One per line.`} rows={Math.min(6, Math.max(2, String(value ?? '').split('\n').length + 1))} />;
  } else {
    input = <Text id={id} label={labelOf(k)} value={String(value ?? '')} error={error} hint={hint} optional
      inputMode={w === 'number' ? 'numeric' : undefined} onInput={onChange} />;
  }
  return (
    <div class="setting" data-key={k.path}>
      {input}
      <details>
        <summary>About {labelOf(k).toLowerCase()}</summary>
        <p><Doc doc={k.doc} /></p>
        {k.default && <p>Default: <code>{k.default}</code></p>}
      </details>
    </div>
  );
}
