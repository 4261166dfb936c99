// Pause filtering for 5 min / 1 h / until resumed, and resume: on every signed-in page, under
// the top bar. The server keeps the pause (GET/POST /api/filter/pause; "until resumed" is a
// pause with no end, not a long one); the page counts down to a timed pause's end and reads it
// again then, and every POLL_MS otherwise (another tab or the API may have changed it).
import { useEffect, useState } from 'preact/hooks';
import { Api, describe } from '../api';
import { PAUSE_CHOICES, PauseBody, PauseState, choiceName, pauseOver, remainingText, untilResumed } from '../pause';

const POLL_MS = 15000;

export function PauseControl({ api }: { api: Api }) {
  const [st, setSt] = useState<PauseState | null>(null);
  const [now, setNow] = useState(Date.now());
  const [open, setOpen] = useState(false);
  const [err, setErr] = useState('');
  const [busy, setBusy] = useState(false);

  const read = async () => {
    try {
      setSt(await api.get<PauseState>('/api/filter/pause'));
      setErr('');
    } catch (e) {
      setErr(describe(e));
    }
  };

  useEffect(() => {
    void read();
    const t = setInterval(() => { if (!document.hidden) void read(); }, POLL_MS);
    return () => clearInterval(t);
  }, []);

  // the countdown: a tick a second while a timed pause runs; at the end the server says what
  // holds (a pause until resumed has nothing to count)
  const forever = st ? untilResumed(st) : false;
  useEffect(() => {
    if (!st?.paused || forever) return;
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [st?.paused, forever]);
  useEffect(() => {
    if (st && pauseOver(st, now)) void read();
  }, [now]);

  const send = async (body: PauseBody) => {
    setBusy(true);
    setErr('');
    try {
      setSt(await api.post<PauseState>('/api/filter/pause', body));
      setNow(Date.now());
      setOpen(false);
      setTimeout(() => document.getElementById('pause-main')?.focus(), 0);
    } catch (e) {
      setErr(describe(e));
    } finally {
      setBusy(false);
    }
  };

  if (!st) return err ? <div class="pausebar"><p class="error" role="alert">{err}</p></div> : null;
  const left = remainingText(st, now);
  const paused = st.paused && left !== '';
  return (
    <div class={paused ? 'pausebar paused' : 'pausebar'} data-testid="pause">
      {/* only the state is a live region: the countdown ticks every second and would be
          announced each time */}
      <p data-testid="pause-state">
        <span role="status">{paused ? 'Filtering is paused' : 'Filtering is on'}</span>
        {paused && `: ${left}`}
      </p>
      {paused ? (
        <button type="button" id="pause-main" disabled={busy} onClick={() => void send({ resume: true })}>
          Resume filtering
        </button>
      ) : (
        <button type="button" id="pause-main" class="ghost" aria-expanded={open} aria-controls="pause-choices"
          onClick={() => setOpen(!open)}>
          Pause filtering…
        </button>
      )}
      {!paused && open && (
        <div class="choices" id="pause-choices" role="group" aria-label="Pause filtering for">
          {PAUSE_CHOICES.map((c) => (
            <button type="button" key={c.label} disabled={busy} onClick={() => void send(c.body)}
              aria-label={choiceName(c.label)}>
              {c.label}
            </button>
          ))}
        </div>
      )}
      {err && <p class="error" role="alert">{err}</p>}
    </div>
  );
}
