import { useState } from 'preact/hooks';
import { Api, describe } from '../api';
import { Field } from '../components/Field';

export function Login({ api, notice, onDone }: { api: Api; notice: string; onDone: () => void }) {
  const [pw, setPw] = useState('');
  const [err, setErr] = useState('');
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setErr('');
    try {
      await api.login(pw);
      setPw('');
      onDone();
    } catch (x) {
      setErr(describe(x));
    } finally {
      setBusy(false);
    }
  };

  return (
    <section class="card narrow" aria-labelledby="login-h">
      <h1 id="login-h">Log in</h1>
      {notice && <p class="notice" role="status">{notice}</p>}
      <form onSubmit={submit}>
        <Field id="password" label="Admin password" type="password" value={pw} onInput={setPw}
          autocomplete="current-password" autofocus error={err} />
        <button type="submit" disabled={busy}>{busy ? 'Checking…' : 'Log in'}</button>
      </form>
    </section>
  );
}
