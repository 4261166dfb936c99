// The Lists page: the blocklist sources (GET/POST/PUT/DELETE /api/filter/sources), each one's
// status with its skipped lines per reason, refresh now with progress, and "which list blocks
// this name?" (/api/lookup). Validation is the server's; its refusal is shown at the field.
import { useEffect, useRef, useState } from 'preact/hooks';
import { Api, ApiError, describe } from '../api';
import { count } from '../format';
import {
  FORMATS, FieldName, Form, HOSTS_ANSWERS, HostsAnswers, Lookup, Mark, Phase, Source, ago, doneCount, emptyForm, entries,
  errorField, fieldMessage, formOf, LOOKUP_TYPES, lookupQuery, lookupText, markOf, optionsText, progress, skipRows, sourceBody,
} from '../lists';
import { Check, Choice } from '../components/Inputs';
import './lists.css';

const POLL_MS = 1000;      // while a refresh round runs: one status read a second
const ROUND_MAX_MS = 30000; // then stop watching: what has not changed by now was unchanged
const IDLE_MS = 15000;     // otherwise a slow re-read keeps last fetch / errors current

type Errors = Partial<Record<FieldName | 'form', string>>;

interface Round { before: Record<string, Mark>; phases: Record<string, Phase>; started: number; which: string | null; over: boolean }

export function Lists({ api }: { api: Api }) {
  const [sources, setSources] = useState<Source[] | null>(null);
  const [loadErr, setLoadErr] = useState('');
  const [now, setNow] = useState(Date.now());
  const [editing, setEditing] = useState<string | null>(null); // null: the form adds
  const [form, setForm] = useState<Form>(emptyForm());
  const [errors, setErrors] = useState<Errors>({});
  const [busy, setBusy] = useState(false);
  const [saved, setSaved] = useState('');
  const [removing, setRemoving] = useState<string | null>(null);
  const [round, setRound] = useState<Round | null>(null);
  const [refreshErr, setRefreshErr] = useState('');
  const formRef = useRef<HTMLFormElement>(null);
  const roundRef = useRef<Round | null>(null);
  roundRef.current = round;

  const load = async (): Promise<Source[] | null> => {
    try {
      const r = await api.get<{ sources: Source[] }>('/api/filter/sources');
      setSources(r.sources);
      setLoadErr('');
      setNow(Date.now());
      const rd = roundRef.current;
      if (rd && !rd.over) {
        const all = progress(rd.before, r.sources);
        const phases = rd.which ? { [rd.which]: all[rd.which] ?? 'waiting' } : all;
        const { done, total } = doneCount(phases);
        setRound({ ...rd, phases, over: done === total || Date.now() - rd.started > ROUND_MAX_MS });
      }
      return r.sources;
    } catch (e) {
      setLoadErr(describe(e));
      return null;
    }
  };

  useEffect(() => {
    void load();
  }, []);

  const watching = round !== null && !round.over;
  useEffect(() => {
    const t = setInterval(() => {
      if (!document.hidden) void load();
    }, watching ? POLL_MS : IDLE_MS);
    return () => clearInterval(t);
  }, [watching]);

  const set = (patch: Partial<Form>) => setForm({ ...form, ...patch });

  const startEdit = (s: Source) => {
    setEditing(s.name);
    setForm(formOf(s));
    setErrors({});
    setSaved('');
    formRef.current?.scrollIntoView({ block: 'start' });
    setTimeout(() => document.getElementById('src-location')?.focus(), 0);
  };

  const cancelEdit = () => {
    setEditing(null);
    setForm(emptyForm());
    setErrors({});
  };

  const submit = async (ev: Event) => {
    ev.preventDefault();
    setBusy(true);
    setErrors({});
    setSaved('');
    try {
      const body = sourceBody(form, editing !== null);
      const r = editing === null
        ? await api.post<{ sources: Source[] }>('/api/filter/sources', body)
        : await api.request<{ sources: Source[] }>('PUT', `/api/filter/sources/${encodeURIComponent(editing)}`, body);
      setSources(r.sources);
      // a file is read by the reload the add made; a URL waits for the next round
      setSaved(editing !== null ? `Saved “${editing}”.`
        : form.kind === 'url' ? `Added “${body.name as string}”. Refresh it to download the list.`
          : `Added “${body.name as string}”.`);
      setEditing(null);
      setForm(emptyForm());
    } catch (e) {
      const f = errorField(e, form.kind);
      setErrors(f ? { [f]: fieldMessage(describe(e)) } : { form: describe(e) });
      if (f) setTimeout(() => document.getElementById(f === 'url' || f === 'path' ? 'src-location' : `src-${f}`)?.focus(), 0);
    } finally {
      setBusy(false);
    }
  };

  const remove = async (name: string) => {
    setRefreshErr('');
    try {
      const r = await api.request<{ sources: Source[] }>('DELETE', `/api/filter/sources/${encodeURIComponent(name)}`);
      setSources(r.sources);
      setSaved(`Removed “${name}”.`);
      if (editing === name) cancelEdit();
      document.getElementById('sources-h')?.focus(); // its button is gone: keep the keyboard here
    } catch (e) {
      setRefreshErr(describe(e));
    } finally {
      setRemoving(null);
    }
  };

  const refresh = async (which: string | null) => {
    setRefreshErr('');
    setSaved('');
    setRound(null); // the last round's result would read as this one's
    const cur = (await load()) ?? sources ?? [];
    const before = markOf(cur);
    try {
      await api.post(which ? `/api/filter/sources/${encodeURIComponent(which)}/refresh` : '/api/filter/sources/refresh');
    } catch (e) {
      setRefreshErr(e instanceof ApiError && e.code === 'refresh_running'
        ? 'A refresh is already running: wait for it to finish.' : describe(e));
      return;
    }
    const all = progress(before, cur);
    const phases = which ? { [which]: all[which] ?? 'waiting' } : all;
    setRound({ before, phases, started: Date.now(), which, over: Object.keys(phases).length === 0 });
  };

  return (
    <>
      <h1>Lists</h1>
      <section class="card" aria-labelledby="sources-h">
        <div class="heading lists-head">
          <h2 id="sources-h" tabIndex={-1}>Blocklist sources</h2>
          <button type="button" onClick={() => void refresh(null)} disabled={watching || !sources?.some((s) => s.url)}>
            Refresh all now
          </button>
        </div>
        <RoundView round={round} />
        {refreshErr && <p class="error" role="alert">{refreshErr}</p>}
        {loadErr && <p class="error" role="alert">{loadErr}</p>}
        {sources === null && !loadErr && <p aria-live="polite">Loading…</p>}
        {sources !== null && sources.length === 0 && <p class="muted">No sources yet: add one below.</p>}
        <ul class="sources" data-testid="sources">
          {(sources ?? []).map((s) => (
            <li key={s.name} class="source" data-source={s.name}>
              <SourceView s={s} now={now} phase={round?.phases[s.name]} />
              <div class="actions">
                <button type="button" class="ghost" onClick={() => startEdit(s)}
                  aria-label={`Edit ${s.name}`}>Edit</button>
                <button type="button" class="ghost" onClick={() => void refresh(s.name)}
                  disabled={watching || !s.enabled || !s.url} aria-label={`Refresh ${s.name} now`}>Refresh</button>
                {removing === s.name ? (
                  <>
                    <button type="button" class="danger" onClick={() => void remove(s.name)}
                      aria-label={`Confirm: remove ${s.name}`}>Confirm remove</button>
                    <button type="button" class="ghost" onClick={() => setRemoving(null)}>Keep</button>
                  </>
                ) : (
                  <button type="button" class="ghost" onClick={() => setRemoving(s.name)}
                    aria-label={`Remove ${s.name}`}>Remove</button>
                )}
              </div>
            </li>
          ))}
        </ul>
        {saved && <p class="notice" role="status">{saved}</p>}
      </section>

      <section class="card" aria-labelledby="form-h">
        <h2 id="form-h">{editing === null ? 'Add a source' : `Edit “${editing}”`}</h2>
        <form ref={formRef} class="source-form" onSubmit={submit} noValidate>
          {editing === null && (
            <TextField id="src-name" label="Name" value={form.name} error={errors.name}
              hint="Letters a–z, digits, - and _." onInput={(v) => set({ name: v })} />
          )}
          <fieldset class="field kind">
            <legend>Where the list comes from</legend>
            <label class="inline"><input type="radio" name="kind" checked={form.kind === 'url'}
              onChange={() => set({ kind: 'url' })} /> Download from a URL</label>
            <label class="inline"><input type="radio" name="kind" checked={form.kind === 'path'}
              onChange={() => set({ kind: 'path' })} /> A file on this box</label>
          </fieldset>
          <TextField id="src-location" label={form.kind === 'url' ? 'URL' : 'File path'} value={form.location}
            error={errors.url ?? errors.path}
            hint={form.kind === 'url' ? 'http:// or https://' : 'In the config file’s directory or state_dir/lists.'}
            onInput={(v) => set({ location: v })} />
          <div class="field">
            <label for="src-format">Format</label>
            <select id="src-format" value={form.format} aria-invalid={errors.format ? 'true' : undefined}
              aria-describedby={errors.format ? 'src-format-err' : undefined}
              onChange={(e) => set({ format: (e.currentTarget as HTMLSelectElement).value })}>
              {FORMATS.map((f) => <option value={f}>{f}</option>)}
            </select>
            {errors.format && <p class="error" id="src-format-err" role="alert">{errors.format}</p>}
          </div>
          <TextField id="src-groups" label="Groups" value={form.groups} error={errors.groups} optional
            hint="Comma-separated group names; empty: the default group." onInput={(v) => set({ groups: v })} />
          <Choice id="src-hosts_answers" label="Hosts lines with a real address" value={form.hostsAnswers}
            choices={HOSTS_ANSWERS.map((h) => h.value)} labels={HOSTS_ANSWERS.map((h) => h.text)}
            error={errors.hosts_answers}
            hint="A line like “192.168.1.5 nas.example”: answer with that address, or block the name as for 0.0.0.0."
            onChange={(v) => set({ hostsAnswers: v as HostsAnswers })} />
          <Check id="src-subdomains" label="Entries cover their subdomains" checked={form.subdomains}
            error={errors.subdomains}
            hint="A plain entry “ads.example” then blocks “x.ads.example” too (Blocky’s reading); off, it blocks that name only (Pi-hole’s)."
            onChange={(v) => set({ subdomains: v })} />
          <div class="field">
            <label class="inline"><input type="checkbox" checked={form.enabled}
              onChange={(e) => set({ enabled: (e.currentTarget as HTMLInputElement).checked })} /> Enabled</label>
          </div>
          {errors.form && <p class="error" role="alert">{errors.form}</p>}
          <div class="actions">
            <button type="submit" disabled={busy}>{editing === null ? 'Add source' : 'Save changes'}</button>
            {editing !== null && <button type="button" class="ghost" onClick={cancelEdit}>Cancel</button>}
          </div>
        </form>
      </section>

      <LookupCard api={api} />
    </>
  );
}

function RoundView({ round }: { round: Round | null }) {
  if (!round) return null;
  const { done, total } = doneCount(round.phases);
  const failed = Object.values(round.phases).filter((p) => p === 'failed').length;
  const label = round.which ? `Refreshing “${round.which}”` : 'Refreshing all sources';
  let text: string;
  if (!round.over) text = `${label}: ${done} of ${total} done…`;
  else if (done === total) text = `Refresh done: ${done - failed} updated${failed ? `, ${failed} failed` : ''}.`;
  else text = `Refresh done: ${done - failed} updated${failed ? `, ${failed} failed` : ''}, ${total - done} unchanged.`;
  return (
    <div class="round" data-testid="refresh-progress">
      <progress max={total || 1} value={round.over ? total || 1 : done} aria-label="Refresh progress" />
      <p role="status">{text}</p>
    </div>
  );
}

function SourceView({ s, now, phase }: { s: Source; now: number; phase?: Phase }) {
  const rows = skipRows(s);
  return (
    <>
      <div class="source-head">
        <h3>{s.name}</h3>
        {!s.enabled && <span class="tag">disabled</span>}
        {phase && <span class={`tag ${phase}`}>{phase === 'waiting' ? 'refreshing' : phase}</span>}
      </div>
      <p class="where">{s.url ?? s.path} · {s.format}{s.groups?.length ? ` · groups: ${s.groups.join(', ')}` : ''}</p>
      {optionsText(s) && <p class="where" data-testid={`options-${s.name}`}>{optionsText(s)}</p>}
      <dl class="facts">
        <div><dt>Entries</dt><dd data-testid={`entries-${s.name}`}>{count(entries(s))}</dd></div>
        <div><dt>Last fetch</dt><dd>{s.url ? ago(s.fetched_at, now) : 'a file'}</dd></div>
        <div><dt>Compiled</dt><dd>{ago(s.compiled_at, now)}</dd></div>
        <div><dt>Skipped lines</dt><dd>{count(s.skipped ?? 0)}</dd></div>
      </dl>
      {s.last_error && <p class="error" data-testid={`error-${s.name}`}>Last error: {s.last_error}</p>}
      {rows.length > 0 && (
        <details class="skips">
          <summary>Skipped lines by reason</summary>
          <table>
            <thead><tr><th scope="col">Reason</th><th scope="col" class="num">Lines</th><th scope="col">First at line</th></tr></thead>
            <tbody>
              {rows.map((r) => (
                <tr><th scope="row">{r.reason}<span class="hint">{r.help}</span></th>
                  <td class="num">{count(r.count)}</td><td>{r.lines}</td></tr>
              ))}
            </tbody>
          </table>
        </details>
      )}
    </>
  );
}

function LookupCard({ api }: { api: Api }) {
  const [name, setName] = useState('');
  const [type, setType] = useState<string>('A');
  const [client, setClient] = useState('');
  const [clientId, setClientId] = useState('');
  const [err, setErr] = useState<Partial<Record<'name' | 'type' | 'client' | 'client_id' | 'form', string>>>({});
  const [result, setResult] = useState('');
  const submit = async (ev: Event) => {
    ev.preventDefault();
    setErr({});
    setResult('');
    try {
      const r = await api.get<Lookup>(lookupQuery(name, type, client, clientId));
      setResult(lookupText(r, type));
    } catch (e) {
      const known = ['name', 'type', 'client', 'client_id'];
      const f = e instanceof ApiError && e.field && known.includes(e.field) ? e.field : 'form';
      setErr({ [f]: describe(e) });
    }
  };
  return (
    <section class="card" aria-labelledby="lookup-h">
      <h2 id="lookup-h">Which list blocks this name?</h2>
      <form onSubmit={submit} noValidate>
        <div class="lookup-row">
          <TextField id="lookup-name" label="Name" value={name} error={err.name} onInput={setName}
            hint="A domain name, e.g. ads.example.com." />
          <Choice id="lookup-type" label="Record type" value={type} choices={LOOKUP_TYPES} error={err.type}
            hint="What the device asks for: A (IPv4), AAAA (IPv6), HTTPS, ..." onChange={setType} />
          <TextField id="lookup-client" label="As seen from client (optional)" value={client} optional
            error={err.client} hint="An IP address; empty: the default group." onInput={setClient} />
          <TextField id="lookup-client-id" label="Client id (optional)" value={clientId} optional
            error={err.client_id} hint="The DoH/DoT client id a device uses, if any." onInput={setClientId} />
        </div>
        {err.form && <p class="error" role="alert">{err.form}</p>}
        <button type="submit">Look up</button>
      </form>
      <p role="status" class="lookup-result" data-testid="lookup-result">{result}</p>
    </section>
  );
}

interface TF {
  id: string; label: string; value: string; onInput: (v: string) => void;
  error?: string; hint?: string; optional?: boolean;
}

// Like components/Field, but a field may be optional (groups, the lookup's client).
function TextField(p: TF) {
  const described = [p.hint ? `${p.id}-hint` : '', p.error ? `${p.id}-err` : ''].filter(Boolean).join(' ');
  return (
    <div class="field">
      <label for={p.id}>{p.label}</label>
      {p.hint && <p class="hint" id={`${p.id}-hint`}>{p.hint}</p>}
      <input id={p.id} name={p.id} type="text" value={p.value} required={!p.optional} spellcheck={false}
        autocomplete="off" aria-invalid={p.error ? 'true' : undefined} aria-describedby={described || undefined}
        onInput={(e) => p.onInput((e.currentTarget as HTMLInputElement).value)} />
      {p.error && <p class="error" id={`${p.id}-err`} role="alert">{p.error}</p>}
    </div>
  );
}
