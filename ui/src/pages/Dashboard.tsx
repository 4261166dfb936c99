// The dashboard: the last 24 h from the query log's aggregates, the lists' size, and memory
// now, refreshed every REFRESH_MS while the page is visible.
import { useEffect, useState } from 'preact/hooks';
import { Api, describe } from '../api';
import { Columns, History, Owner, dayWindow, historyColumns, topOwners } from '../chart';
import { bytes, clientLabel, count, percent } from '../format';
import { HistoryChart } from '../components/Chart';

const REFRESH_MS = 5000; // a glance, not a monitor: one set of reads every 5 s
const STEP_S = 1800;	 // 48 points over 24 h: readable at 390 px
const TOP_N = 10;
const OWNERS_N = 8;

interface Summary {
  queries: number;
  blocked: number;
  blocked_percent: number;
  cached: number;
  clients: number;
}
// client_name: top clients may carry the client's name (optional: older servers send none)
interface Top { items: { key: string; count: number; client_name?: string | null }[] }
interface Source { name: string; enabled: boolean; list: number; wild: number }
interface Memory {
  owners: Owner[];
  ledger_bytes: number;
  process: { vmrss: number; vmhwm: number; rssanon: number; rssfile: number; threads: number };
  unexplained_bytes: number;
}

interface State {
  summary: Summary;
  columns: Columns;
  domains: Top;
  blocked: Top;
  clients: Top;
  sources: Source[];
  memory: Memory;
  at: number;
}

async function load(api: Api): Promise<State> {
  const now = Date.now();
  const w = dayWindow(now, STEP_S);
  const range = `from=${w.from}&to=${w.to}`;
  const top = (kind: string) => api.get<Top>(`/api/stats/top?kind=${kind}&limit=${TOP_N}&${range}`);
  const [summary, history, domains, blocked, clients, sources, memory] = await Promise.all([
    api.get<Summary>(`/api/stats/summary?${range}`),
    api.get<History>(`/api/stats/history?${range}&step=${STEP_S}`),
    top('domains'),
    top('blocked'),
    top('clients'),
    api.get<{ sources: Source[] }>('/api/filter/sources'),
    api.get<Memory>('/api/memory'),
  ]);
  return {
    summary, columns: historyColumns(history), domains, blocked, clients,
    sources: sources.sources, memory, at: now,
  };
}

function Stat({ id, label, value, sub }: { id: string; label: string; value: string; sub?: string }) {
  return (
    <div class="stat" data-stat={id}>
      <dt>{label}</dt>
      <dd>
        <span class="value" data-testid={`stat-${id}`}>{value}</span>
        {sub && <span class="sub">{sub}</span>}
      </dd>
    </div>
  );
}

function TopName({ id, item }: { id: string; item: Top['items'][number] }) {
  if (id !== 'clients') return <span class="name">{item.key}</span>;
  const l = clientLabel(item.key, item.client_name);
  return (
    <span class="name">
      {l.main}
      {l.aside && <span class="aside"> {l.aside}</span>}
    </span>
  );
}

function TopList({ title, id, top, empty }: { title: string; id: string; top: Top; empty: string }) {
  return (
    <section class="card" aria-labelledby={`${id}-h`}>
      <h2 id={`${id}-h`}>{title}</h2>
      {top.items.length === 0 ? (
        <p class="muted">{empty}</p>
      ) : (
        <ol class="top" data-testid={`top-${id}`}>
          {top.items.map((it) => (
            <li key={it.key}>
              <TopName id={id} item={it} />
              <span class="n">{count(it.count)}</span>
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}

export function Dashboard({ api }: { api: Api }) {
  const [st, setSt] = useState<State | null>(null);
  const [err, setErr] = useState('');

  useEffect(() => {
    let alive = true;
    let timer = 0;
    const tick = async () => {
      if (!document.hidden) {
        try {
          const s = await load(api);
          if (alive) {
            setSt(s);
            setErr('');
          }
        } catch (e) {
          if (alive) {
            setErr(describe(e));
          }
        }
      }
      if (alive) {
        timer = window.setTimeout(tick, REFRESH_MS);
      }
    };
    void tick();
    return () => {
      alive = false;
      window.clearTimeout(timer);
    };
  }, [api]);

  if (!st) {
    return (
      <>
        <h1>Dashboard</h1>
        {err ? <p class="error" role="alert">{err}</p> : <p aria-live="polite">Loading…</p>}
      </>
    );
  }
  const s = st.summary;
  const exact = st.sources.reduce((n, x) => n + (x.enabled ? x.list : 0), 0);
  const wild = st.sources.reduce((n, x) => n + (x.enabled ? x.wild : 0), 0);
  const enabled = st.sources.filter((x) => x.enabled).length;
  const m = st.memory;
  const owners = topOwners(m.owners, OWNERS_N);
  const maxOwner = owners.reduce((n, o) => Math.max(n, o.bytes), 1);

  return (
    <>
      <div class="heading">
        <h1>Dashboard</h1>
        <p class="muted" aria-live="off">
          Last 24 hours · updated {new Date(st.at).toLocaleTimeString()}
        </p>
      </div>
      {err && <p class="error" role="alert">Refresh failed: {err}</p>}
      <dl class="stats" aria-label="Last 24 hours">
        <Stat id="queries" label="Queries" value={count(s.queries)} />
        <Stat id="blocked" label="Blocked" value={count(s.blocked)}
          sub={percent(s.blocked_percent)} />
        <Stat id="cached" label="Answered from cache" value={count(s.cached)} />
        <Stat id="clients" label="Clients" value={count(s.clients)} />
        <Stat id="entries" label="List entries" value={count(exact + wild)}
          sub={`${count(exact)} exact, ${count(wild)} wildcard in ${enabled} list${enabled === 1 ? '' : 's'}`} />
      </dl>

      <section class="card" aria-labelledby="hist-h">
        <h2 id="hist-h">Queries over time</h2>
        <HistoryChart data={st.columns} stepS={STEP_S} />
      </section>

      <div class="grid3">
        <TopList id="domains" title="Top names" top={st.domains} empty="No queries yet." />
        <TopList id="blocked" title="Top blocked names" top={st.blocked} empty="Nothing blocked yet." />
        <TopList id="clients" title="Top clients" top={st.clients} empty="No clients yet." />
      </div>

      <section class="card" aria-labelledby="mem-h">
        <h2 id="mem-h">Memory now</h2>
        <dl class="stats small">
          <Stat id="rss" label="Resident (RSS)" value={bytes(m.process.vmrss)} />
          <Stat id="hwm" label="Peak resident (VmHWM)" value={bytes(m.process.vmhwm)} />
          <Stat id="ledger" label="Accounted by owners" value={bytes(m.ledger_bytes)} />
          <Stat id="threads" label="Threads" value={count(m.process.threads)} />
        </dl>
        <table class="owners">
          <caption>Largest owners in the memory ledger</caption>
          <thead>
            <tr><th scope="col">Owner</th><th scope="col" class="num">Bytes</th>
              <th scope="col" class="bar-col"><span class="sr">Share</span></th></tr>
          </thead>
          <tbody>
            {owners.map((o) => (
              <tr key={o.owner} title={o.help}>
                <th scope="row">{o.owner}</th>
                <td class="num">{bytes(o.bytes)}</td>
                <td class="bar-col">
                  <progress max={maxOwner} value={o.bytes} aria-label={`${o.owner}: ${bytes(o.bytes)}`} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </section>
    </>
  );
}
