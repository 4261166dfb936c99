// Log in: the password, and the authenticator's code when a second factor is enrolled (the
// auth status says so; a login the server answers totp_required asks for it too, so an older
// status or one read before the enrolment cannot lock the page out).
import { useState } from 'preact/hooks';
import { Api, ApiError, describe } from '../api';
import { Field } from '../components/Field';
import { cleanCode, codeProblem, wantsCode } from '../security';

export function Login({ api, notice, totp, onDone }: { api: Api; notice: string; totp?: boolean; onDone: () => void }) {
  const [pw, setPw] = useState('');
  const [code, setCode] = useState('');
  const [askCode, setAskCode] = useState(!!totp);
  const [err, setErr] = useState('');
  const [codeErr, setCodeErr] = useState('');
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    setErr('');
    setCodeErr('');
    if (askCode && codeProblem(code)) {
      setCodeErr(codeProblem(code));
      setTimeout(() => document.getElementById('totp')?.focus(), 0);
      return;
    }
    setBusy(true);
    try {
      await api.login(pw, askCode ? cleanCode(code) : undefined);
      setPw('');
      setCode('');
      onDone();
    } catch (x) {
      if (wantsCode(x)) {
        const first = !askCode;
        setAskCode(true);
        setCode('');
        setCodeErr(first ? 'This server has a second factor: enter the code from the authenticator app.' : describe(x));
        setTimeout(() => document.getElementById('totp')?.focus(), 0);
      } else {
        setErr(describe(x));
        if (x instanceof ApiError && x.status === 401) setTimeout(() => document.getElementById('password')?.focus(), 0);
      }
    } finally {
      setBusy(false);
    }
  };

  return (
    <section class="card narrow" aria-labelledby="login-h">
      <h1 id="login-h">Log in</h1>
      {notice && <p class="notice" role="status">{notice}</p>}
      <form onSubmit={submit} noValidate>
        <Field id="password" label="Admin password" type="password" value={pw} onInput={setPw}
          autocomplete="current-password" autofocus error={err} />
        {askCode && (
          <Field id="totp" label="Authenticator code" value={code} onInput={setCode} inputMode="numeric"
            autocomplete="one-time-code" hint="The 6-digit code the authenticator app shows for nxdns." error={codeErr} />
        )}
        <button type="submit" disabled={busy}>{busy ? 'Checking…' : 'Log in'}</button>
      </form>
    </section>
  );
}
