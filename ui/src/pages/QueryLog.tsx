// The query log: the searchable history (/api/queries, keyset pages) and the live stream
// (/api/queries/live, SSE), one form filtering both. Each row says why in words and offers the
// one-click rule (allow a blocked name, block another) with undo.
import { useEffect, useRef, useState } from 'preact/hooks';
import { Api, ApiError, describe } from '../api';
import {
  Change, Filter, PROTOS, QueryPage, QueryRow, STATUSES, buttonText, changeFor, changeText, explain,
  invert, isBlocked, localTimeMs, matches, parseLive, pushLive, queriesUrl, statusWord, timeOfDay,
} from '../querylog';
import { clientLabel } from '../format';
import '../querylog.css';

const LIVE_FLUSH_MS = 500; // a burst renders once per half second, not once per query

type Mode = 'history' | 'live';

interface Done {
  change: Change;
  ours: boolean; // false when the rules already were so: undo must not change them
}

const EMPTY: Filter = { client: '', name: '', status: 'all', proto: '', from: 0, to: 0 };

// The client by name with the address beside it, or the address alone (no name known).
function ClientText({ r }: { r: QueryRow }) {
  const l = clientLabel(r.client, r.client_name);
  return l.aside ? <span class="qclient">{l.main} <span class="aside">({l.aside})</span></span>
    : <span class="qclient">{l.main}</span>;
}

function Row({ r, busy, onRule }: { r: QueryRow; busy: boolean; onRule: (r: QueryRow) => void }) {
  const word = statusWord(r);
  const blocked = isBlocked(r);
  const b = buttonText(changeFor(r), r);
  return (
    <li class={`qrow ${word}`} data-testid="query-row" data-name={r.name}>
      <div class="qhead">
        <span class="qname">{r.name}</span>
        <span class={`badge ${word}`}>{word}</span>
      </div>
      <p class="qwhy">{explain(r)}</p>
      <p class="qmeta">
        <time dateTime={new Date(r.ts).toISOString()}>{timeOfDay(r.ts)}</time>
        {' · '}<ClientText r={r} />{r.client_id ? ` (${r.client_id})` : ''}
        {' · '}{r.proto.toUpperCase()} {r.qtype}{' · '}{r.rcode}
        {r.answer ? ` · ${r.answer}` : ''}
      </p>
      <button type="button" class={blocked ? 'small' : 'small ghost'} disabled={busy}
        aria-label={b.label} onClick={() => onRule(r)}>
        {b.text}
      </button>
    </li>
  );
}

export function QueryLog({ api }: { api: Api }) {
  const [mode, setMode] = useState<Mode>('history');
  const [form, setForm] = useState({ client: '', name: '', status: 'all', proto: '', from: '', to: '' });
  const [filter, setFilter] = useState<Filter>(EMPTY);
  const [page, setPage] = useState<QueryPage | null>(null);
  const [cursors, setCursors] = useState<(string | null)[]>([null]); // the pages walked so far
  const [live, setLive] = useState<QueryRow[]>([]);
  const [livePaused, setLivePaused] = useState(false);
  const [liveState, setLiveState] = useState('');
  const [err, setErr] = useState('');
  const [fieldErr, setFieldErr] = useState<{ field?: string; msg: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const [done, setDone] = useState<Done | null>(null);
  const [notice, setNotice] = useState('');
  const pending = useRef<QueryRow[]>([]);
  const noticeRef = useRef<HTMLParagraphElement>(null);

  const cursor = cursors[cursors.length - 1];

  useEffect(() => {
    if (mode !== 'history') return;
    let alive = true;
    api.get<QueryPage>(queriesUrl(filter, cursor))
      .then((p) => {
        if (alive) { setPage(p); setErr(''); setFieldErr(null); }
      })
      .catch((e) => {
        if (!alive) return;
        if (e instanceof ApiError && e.status === 400) setFieldErr({ field: e.field, msg: e.message });
        else setErr(describe(e));
      });
    return () => { alive = false; };
  }, [api, mode, filter, cursor]);

  useEffect(() => {
    if (mode !== 'live' || livePaused) return;
    setLiveState('Connecting…');
    const es = new EventSource('/api/queries/live');
    es.onopen = () => setLiveState('Live: new queries appear at the top.');
    es.onerror = () => {
      if (es.readyState !== EventSource.CLOSED) {
        setLiveState('Connection lost: reconnecting…');
        return;
      }
      // EventSource does not say why it was refused: a plain read tells an ended session
      // (the app then asks to log in again) from a refusal of the stream itself.
      api.get('/api/auth/status').then(
        () => setLiveState('The live stream was refused: too many viewers, or it is disabled.'),
        (e) => setLiveState(`The live stream stopped: ${describe(e)}`));
    };
    es.onmessage = (ev: MessageEvent<string>) => {
      const r = parseLive(ev.data);
      if (r) pending.current.push(r);
    };
    const t = window.setInterval(() => {
      if (pending.current.length) {
        const fresh = pending.current;
        pending.current = [];
        setLive((rows) => pushLive(rows, fresh));
      }
    }, LIVE_FLUSH_MS);
    return () => { es.close(); window.clearInterval(t); };
  }, [mode, livePaused]);

  const search = (e: Event) => {
    e.preventDefault();
    const from = localTimeMs(form.from);
    const to = localTimeMs(form.to);
    if (form.from && !from) { setFieldErr({ field: 'from', msg: 'not a date and time' }); return; }
    if (form.to && !to) { setFieldErr({ field: 'to', msg: 'not a date and time' }); return; }
    if (from && to && to <= from) { setFieldErr({ field: 'to', msg: '“To” must be after “From”.' }); return; }
    setFieldErr(null);
    setFilter({ client: form.client, name: form.name, status: form.status, proto: form.proto, from, to });
    setCursors([null]);
  };

  const clear = () => {
    setForm({ client: '', name: '', status: 'all', proto: '', from: '', to: '' });
    setFieldErr(null);
    setFilter(EMPTY);
    setCursors([null]);
  };

  // POST adds a rule, DELETE removes it; 409 exists / 404 not_found mean the rules already
  // were as asked: said so, and no undo (it would undo something this click did not do).
  const send = (c: Change) =>
    api.request(c.op === 'add' ? 'POST' : 'DELETE', '/api/filter/rules', c.rule);
  const already = (e: unknown, c: Change) =>
    e instanceof ApiError && e.code === (c.op === 'add' ? 'exists' : 'not_found');

  const applyRule = async (r: QueryRow) => {
    const change = changeFor(r);
    setBusy(true);
    setNotice('');
    try {
      await send(change);
      setDone({ change, ours: true });
      setNotice(changeText(change));
    } catch (e) {
      setDone(null);
      setNotice(already(e, change)
        ? `Nothing to do: ${describe(e)}.`
        : `Could not change the ${change.rule.list} rules for ${change.rule.rule}: ${describe(e)}`);
    } finally {
      setBusy(false);
    }
  };

  const undo = async () => {
    if (!done) return;
    const back = invert(done.change);
    setBusy(true);
    try {
      await send(back);
      setNotice(`Undone: ${changeText(back)}`);
      setDone(null);
      // the Undo button goes away: keep the keyboard user's place on the notice instead
      window.setTimeout(() => noticeRef.current?.focus(), 0);
    } catch (e) {
      setNotice(`Undo failed: ${describe(e)}`);
    } finally {
      setBusy(false);
    }
  };

  const rows = mode === 'history' ? page?.items ?? [] : live.filter((r) => matches(r, filter));
  const errFor = (f: string) => (fieldErr && fieldErr.field === f ? fieldErr.msg : undefined);
  const input = (id: keyof typeof form, label: string, type = 'text', hint?: string) => (
    <div class="field">
      <label for={`q-${id}`}>{label}</label>
      <input id={`q-${id}`} type={type} value={form[id]} spellcheck={false}
        aria-invalid={errFor(id) ? 'true' : undefined}
        aria-describedby={errFor(id) ? `q-${id}-err` : hint ? `q-${id}-hint` : undefined}
        onInput={(e) => setForm({ ...form, [id]: (e.currentTarget as HTMLInputElement).value })} />
      {hint && !errFor(id) && <p class="hint" id={`q-${id}-hint`}>{hint}</p>}
      {errFor(id) && <p class="error" id={`q-${id}-err`} role="alert">{errFor(id)}</p>}
    </div>
  );

  return (
    <>
      <div class="heading">
        <h1>Query log</h1>
        <div class="modes" role="group" aria-label="View">
          <button type="button" class="ghost" aria-pressed={mode === 'history'}
            onClick={() => setMode('history')}>History</button>
          <button type="button" class="ghost" aria-pressed={mode === 'live'}
            onClick={() => { setLive([]); setMode('live'); }}>Live</button>
        </div>
      </div>

      <form class="card qfilter" onSubmit={search} aria-label="Filter queries">
        {input('name', 'Name contains', 'search')}
        {input('client', 'Client address', 'text', 'exact, e.g. 192.168.1.20')}
        <div class="field">
          <label for="q-status">Status</label>
          <select id="q-status" value={form.status}
            onChange={(e) => setForm({ ...form, status: (e.currentTarget as HTMLSelectElement).value })}>
            {STATUSES.map((s) => <option key={s} value={s}>{s}</option>)}
          </select>
        </div>
        <div class="field">
          <label for="q-proto">Protocol</label>
          <select id="q-proto" value={form.proto}
            onChange={(e) => setForm({ ...form, proto: (e.currentTarget as HTMLSelectElement).value })}>
            <option value="">any</option>
            {PROTOS.map((s) => <option key={s} value={s}>{s.toUpperCase()}</option>)}
          </select>
        </div>
        {input('from', 'From', 'datetime-local')}
        {input('to', 'To', 'datetime-local')}
        <div class="qactions">
          <button type="submit">Search</button>
          <button type="button" class="ghost" onClick={clear}>Clear</button>
        </div>
        {fieldErr && !['name', 'client', 'from', 'to'].includes(fieldErr.field ?? '') && (
          <p class="error" role="alert">{fieldErr.msg}</p>
        )}
      </form>

      <div aria-live="polite" class="qnotice" data-testid="rule-notice">
        {notice && (
          <p class="notice" ref={noticeRef} tabIndex={-1}>
            {notice}{' '}
            {done?.ours && (
              <button type="button" class="small ghost" disabled={busy} onClick={() => void undo()}>
                Undo
              </button>
            )}
          </p>
        )}
      </div>
      {err && <p class="error" role="alert">{err}</p>}

      <section class="card" aria-labelledby="qlist-h">
        <div class="heading">
          <h2 id="qlist-h">{mode === 'history' ? 'Queries, newest first' : 'Live queries'}</h2>
          {mode === 'live' && (
            <>
              <p class="muted" role="status">{livePaused ? 'Paused.' : liveState}</p>
              <button type="button" class="small ghost" onClick={() => setLivePaused(!livePaused)}>
                {livePaused ? 'Resume' : 'Pause'}
              </button>
            </>
          )}
        </div>
        {rows.length === 0 ? (
          <p class="muted">
            {mode === 'history' ? (page ? 'No query matches.' : 'Loading…') : 'Waiting for queries…'}
          </p>
        ) : (
          <ul class="qlist">
            {rows.map((r, i) => <Row key={`${r.ts}-${r.id ?? i}-${r.name}`} r={r} busy={busy} onRule={applyRule} />)}
          </ul>
        )}
        {mode === 'history' && (
          <nav class="pager" aria-label="Pages">
            <button type="button" class="ghost" disabled={cursors.length === 1}
              onClick={() => setCursors([null])}>Newest</button>
            <button type="button" class="ghost" disabled={cursors.length === 1}
              onClick={() => setCursors(cursors.slice(0, -1))}>Newer</button>
            <button type="button" class="ghost" disabled={!page?.next_cursor}
              onClick={() => page?.next_cursor && setCursors([...cursors, page.next_cursor])}>Older</button>
          </nav>
        )}
      </section>
    </>
  );
}
