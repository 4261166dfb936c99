// On a replica (GET /api/sync/status says replica): a banner on every signed-in page naming the
// primary, the last sync, its result and error, with "Sync now" (POST /api/sync/now). Nothing
// at all on a server that follows no primary.
import { useEffect, useState } from 'preact/hooks';
import { Api, describe } from '../api';
import { SyncStatus, banner } from '../sync';

const POLL_MS = 15000; // a pull every sync.interval (minutes): a slow read keeps "ago" honest
const FAST_MS = 1000;  // after "Sync now": until the pull is done
const FAST_MAX = 20;   // then back to the slow read (the pull has its own timeout)

export function SyncBanner({ api }: { api: Api }) {
  const [st, setSt] = useState<SyncStatus | null>(null);
  const [now, setNow] = useState(Date.now());
  const [err, setErr] = useState('');
  const [fast, setFast] = useState(0); // fast reads left
  const [busy, setBusy] = useState(false);

  const read = async (): Promise<SyncStatus | null> => {
    try {
      const s = await api.get<SyncStatus>('/api/sync/status');
      setSt(s);
      setNow(Date.now());
      return s;
    } catch {
      return null; // an older server without the route, or a blip: no banner, no noise
    }
  };

  useEffect(() => {
    void read();
    const t = setInterval(() => { if (!document.hidden) void read(); }, POLL_MS);
    return () => clearInterval(t);
  }, []);

  useEffect(() => {
    if (fast <= 0) return;
    const t = setTimeout(async () => {
      const s = await read();
      setFast(s && s.running ? fast - 1 : 0);
    }, FAST_MS);
    return () => clearTimeout(t);
  }, [fast]);

  const b = banner(st, now);
  if (!b) return null;

  const syncNow = async () => {
    setBusy(true);
    setErr('');
    try {
      await api.post('/api/sync/now');
      setSt(st ? { ...st, running: true } : st);
      setFast(FAST_MAX);
    } catch (e) {
      setErr(describe(e));
    } finally {
      setBusy(false);
    }
  };

  return (
    <section class={`sync-banner${b.error ? ' failed' : ''}`} aria-labelledby="sync-banner-h" data-testid="sync-banner">
      <div>
        <p id="sync-banner-h" class="sync-title">{b.title}</p>
        <p role="status">{b.detail}</p>
        {b.error && <p class="error">Error: {b.error}</p>}
        {err && <p class="error" role="alert">{err}</p>}
      </div>
      <button type="button" onClick={syncNow} disabled={busy || !!st?.running}>Sync now</button>
    </section>
  );
}
