// The Security page: the login's second factor (TOTP: enrol, confirm with a code, remove) and
// the backup archive (download; upload a restore). The server does the work and words the
// refusals (src/admin/auth.c, api_backup.c); the page shows the new secret once, as the server
// does, and never keeps it after the enrolment ends.
import { useEffect, useState } from 'preact/hooks';
import { Api, AuthStatus, describe } from '../api';
import { Check, Text, focusLater } from '../components/Inputs';
import {
  Enrolment, Restored, backupHref, cleanCode, codeProblem, expiresText, groupSecret, restoredText,
} from '../security';
import './edit.css';
import './security.css';

export function Security({ api }: { api: Api }) {
  return (
    <>
      <h1>Security</h1>
      <TotpCard api={api} />
      <BackupCard api={api} />
    </>
  );
}

function TotpCard({ api }: { api: Api }) {
  const [enrolled, setEnrolled] = useState<boolean | null>(null);
  const [loadErr, setLoadErr] = useState('');
  const [pending, setPending] = useState<Enrolment | null>(null);
  const [code, setCode] = useState('');
  const [codeErr, setCodeErr] = useState('');
  const [formErr, setFormErr] = useState('');
  const [done, setDone] = useState('');
  const [removing, setRemoving] = useState(false);
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    api.get<AuthStatus>('/api/auth/status').then((st) => setEnrolled(!!st.totp), (e) => setLoadErr(describe(e)));
  }, []);

  const clear = () => { setCode(''); setCodeErr(''); setFormErr(''); };

  const start = async () => {
    clear();
    setDone('');
    setBusy(true);
    try {
      setPending(await api.post<Enrolment>('/api/auth/totp'));
      focusLater('totp-code');
    } catch (e) {
      setFormErr(describe(e));
    } finally {
      setBusy(false);
    }
  };

  // confirm (enrol) or remove: both send {code}; the server answers {totp: bool}
  const send = async (ev: Event, method: 'POST' | 'DELETE') => {
    ev.preventDefault();
    setCodeErr('');
    setFormErr('');
    const problem = codeProblem(code);
    if (problem) {
      setCodeErr(problem);
      focusLater('totp-code');
      return;
    }
    setBusy(true);
    try {
      const path = method === 'POST' ? '/api/auth/totp/confirm' : '/api/auth/totp';
      const r = await api.request<{ totp: boolean }>(method, path, { code: cleanCode(code) });
      setEnrolled(r.totp);
      setPending(null);
      setRemoving(false);
      clear();
      setDone(r.totp
        ? 'The second factor is on: every login now asks for a code from the authenticator app.'
        : 'The second factor is off: the password alone logs in.');
      document.getElementById('totp-h')?.focus();
    } catch (e) {
      const msg = describe(e);
      if ((e as { field?: string }).field === 'code') {
        setCodeErr(msg);
        focusLater('totp-code');
      } else {
        setFormErr(msg);
      }
    } finally {
      setBusy(false);
    }
  };

  const codeField = (
    <Text id="totp-code" label="Code from the authenticator app" value={code} onInput={setCode} inputMode="numeric"
      error={codeErr} hint="6 digits; a new one every 30 seconds." />
  );

  return (
    <section class="card" aria-labelledby="totp-h">
      <h2 id="totp-h" tabIndex={-1}>Second factor for the login</h2>
      <p class="muted">With a second factor, logging in needs the password and a code from an authenticator app
        (TOTP: Aegis, FreeOTP, Google Authenticator, a password manager).</p>
      {loadErr && <p class="error" role="alert">{loadErr}</p>}
      {enrolled === null && !loadErr && <p aria-live="polite">Loading…</p>}
      {done && <p class="notice" role="status">{done}</p>}
      <p data-testid="totp-state">
        {enrolled === true && 'A second factor is on.'}
        {enrolled === false && !pending && 'No second factor: the password alone logs in.'}
      </p>

      {enrolled === false && !pending && (
        <button type="button" disabled={busy} onClick={() => void start()}>Set up a second factor</button>
      )}

      {enrolled === false && pending && (
        <form class="edit-form" onSubmit={(ev) => void send(ev, 'POST')} noValidate>
          <p>Add this key to the authenticator app: open the link on the device that has the app, or type the
            secret in. It is shown only now, and waits {expiresText(pending.expires_in)} for a code.</p>
          <dl class="totp-key">
            <dt>Secret</dt>
            <dd><code data-testid="totp-secret" data-secret={pending.secret}>{groupSecret(pending.secret)}</code></dd>
            <dt>Link</dt>
            <dd><a href={pending.uri} data-testid="totp-uri" class="wrap">{pending.uri}</a></dd>
          </dl>
          {codeField}
          {formErr && <p class="error" role="alert">{formErr}</p>}
          <div class="actions">
            <button type="submit" disabled={busy}>Turn on</button>
            <button type="button" class="ghost" onClick={() => { setPending(null); clear(); }}>Cancel</button>
          </div>
        </form>
      )}

      {enrolled === true && !removing && (
        <button type="button" class="ghost" onClick={() => { setRemoving(true); setDone(''); clear(); focusLater('totp-code'); }}>
          Remove the second factor…
        </button>
      )}
      {enrolled === true && removing && (
        <form class="edit-form" onSubmit={(ev) => void send(ev, 'DELETE')} noValidate>
          <p>Removing it needs a current code, so a stolen session alone cannot turn it off.</p>
          {codeField}
          {formErr && <p class="error" role="alert">{formErr}</p>}
          <div class="actions">
            <button type="submit" class="danger" disabled={busy}>Remove</button>
            <button type="button" class="ghost" onClick={() => { setRemoving(false); clear(); }}>Keep it</button>
          </div>
        </form>
      )}
      {formErr && !pending && !removing && <p class="error" role="alert">{formErr}</p>}
    </section>
  );
}

function BackupCard({ api }: { api: Api }) {
  const [withLog, setWithLog] = useState(false);
  const [file, setFile] = useState<File | null>(null);
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState('');
  const [err, setErr] = useState('');

  const restore = async () => {
    if (!file) return;
    setBusy(true);
    setErr('');
    setResult('');
    try {
      setResult(restoredText(await api.upload<Restored>('/api/restore', file)));
    } catch (e) {
      setErr(describe(e));
    } finally {
      setBusy(false);
      setConfirming(false);
    }
  };

  return (
    <section class="card" aria-labelledby="backup-h">
      <h2 id="backup-h">Backup and restore</h2>
      <p class="muted">One archive holds the configuration (with the admin password's hash and the second
        factor's secret: keep it private), the lists' state and the TLS certificate.</p>
      <Check id="backup-querylog" label="Include the query log" checked={withLog} onChange={setWithLog}
        hint="The log can be large; a restore through this page never replaces the running log." />
      <p><a class="button" href={backupHref(withLog)} download data-testid="backup-link">Download a backup</a></p>

      <h3>Restore</h3>
      <div class="field">
        <label for="restore-file">Backup archive</label>
        <p class="hint" id="restore-file-hint">A file made by this page or by <code>nxdns backup</code>. The whole
          archive is checked first: a bad one changes nothing.</p>
        <input id="restore-file" type="file" aria-describedby="restore-file-hint"
          onChange={(e) => { setFile((e.currentTarget as HTMLInputElement).files?.[0] ?? null); setConfirming(false); setResult(''); setErr(''); }} />
      </div>
      <div class="actions">
        {!confirming ? (
          <button type="button" disabled={!file || busy} onClick={() => setConfirming(true)}>Restore…</button>
        ) : (
          <>
            <button type="button" class="danger" disabled={busy} onClick={() => void restore()}>
              {busy ? 'Restoring…' : `Replace the configuration with ${file?.name ?? 'the archive'}`}
            </button>
            <button type="button" class="ghost" onClick={() => setConfirming(false)}>Cancel</button>
          </>
        )}
      </div>
      {result && <p class="notice" role="status" data-testid="restore-result">{result}</p>}
      {err && <p class="error" role="alert" data-testid="restore-error">{err}</p>}
    </section>
  );
}
