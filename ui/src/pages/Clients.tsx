// The Clients page: GET/POST /api/clients, PUT/DELETE /api/clients/<name>. A client is a name
// for addresses, prefixes or DoH/DoT client ids, and the groups it belongs to. The loader
// validates (addresses, host bits, unknown groups); its refusal is shown at the field.
import { useEffect, useState } from 'preact/hooks';
import { Api, describe } from '../api';
import { locate } from '../forms';
import { CLIENT_FIELDS, Client, ClientForm, clientBody, clientForm, emptyClient, idText, toggle } from '../config';
import { CheckList, Lines, Text, focusLater } from '../components/Inputs';
import './edit.css';

type Errors = Partial<Record<'name' | 'ids' | 'groups' | 'form', string>>;
const IDS: Record<string, string> = { name: 'client-name', ids: 'client-ids', groups: 'client-groups' };

export function Clients({ api }: { api: Api }) {
  const [clients, setClients] = useState<Client[] | null>(null);
  const [groups, setGroups] = useState<string[]>([]);
  const [loadErr, setLoadErr] = useState('');
  const [editing, setEditing] = useState<string | null>(null);
  const [form, setForm] = useState<ClientForm>(emptyClient());
  const [errors, setErrors] = useState<Errors>({});
  const [busy, setBusy] = useState(false);
  const [saved, setSaved] = useState('');
  const [removing, setRemoving] = useState<string | null>(null);

  useEffect(() => {
    api.get<{ clients: Client[] }>('/api/clients').then((r) => setClients(r.clients), (e) => setLoadErr(describe(e)));
    api.get<{ groups: { name: string }[] }>('/api/groups')
      .then((r) => setGroups(r.groups.map((g) => g.name)), (e) => setLoadErr(describe(e)));
  }, []);

  const reset = () => {
    setEditing(null);
    setForm(emptyClient());
    setErrors({});
  };

  const submit = async (ev: Event) => {
    ev.preventDefault();
    setBusy(true);
    setErrors({});
    setSaved('');
    try {
      const body = clientBody(form, editing !== null);
      const r = editing === null
        ? await api.post<{ clients: Client[] }>('/api/clients', body)
        : await api.request<{ clients: Client[] }>('PUT', `/api/clients/${encodeURIComponent(editing)}`, body);
      setClients(r.clients);
      setSaved(editing === null ? `Added the client “${form.name.trim()}”.` : `Saved the client “${editing}”.`);
      reset();
    } catch (e) {
      const l = locate(e, 'clients', CLIENT_FIELDS, editing === null ? 'name' : 'ids');
      setErrors(l.field ? { [l.field]: l.message } : { form: l.message });
      if (l.field) focusLater(IDS[l.field]);
    } finally {
      setBusy(false);
    }
  };

  const remove = async (name: string) => {
    setSaved('');
    setErrors({});
    try {
      const r = await api.request<{ clients: Client[] }>('DELETE', `/api/clients/${encodeURIComponent(name)}`);
      setClients(r.clients);
      setSaved(`Removed the client “${name}”.`);
      if (editing === name) reset();
      document.getElementById('clients-h')?.focus();
    } catch (e) {
      setErrors({ form: describe(e) });
    } finally {
      setRemoving(null);
    }
  };

  const startEdit = (c: Client) => {
    setEditing(c.name);
    setForm(clientForm(c));
    setErrors({});
    setSaved('');
    focusLater('client-ids');
  };

  return (
    <>
      <h1>Clients</h1>
      <section class="card" aria-labelledby="clients-h">
        <h2 id="clients-h" tabIndex={-1}>Named clients</h2>
        <p class="muted">Name the devices of the network: the query log and the dashboard show the name, and its groups pick its lists.</p>
        {loadErr && <p class="error" role="alert">{loadErr}</p>}
        {clients === null && !loadErr && <p aria-live="polite">Loading…</p>}
        {clients !== null && clients.length === 0 && <p class="muted">No clients yet: add one below.</p>}
        <ul class="items" data-testid="clients">
          {(clients ?? []).map((c) => (
            <li key={c.name} class="item" data-client={c.name}>
              <div class="what">
                <strong>{c.name}</strong>
                <p class="hint">{c.ids.map(idText).join(', ')} · groups: {c.groups.length ? c.groups.join(', ') : 'default'}</p>
              </div>
              <div class="actions">
                <button type="button" class="ghost" onClick={() => startEdit(c)} aria-label={`Edit ${c.name}`}>Edit</button>
                {removing === c.name ? (
                  <>
                    <button type="button" class="danger" onClick={() => void remove(c.name)}
                      aria-label={`Confirm: remove ${c.name}`}>Confirm remove</button>
                    <button type="button" class="ghost" onClick={() => setRemoving(null)}>Keep</button>
                  </>
                ) : (
                  <button type="button" class="ghost" onClick={() => setRemoving(c.name)} aria-label={`Remove ${c.name}`}>Remove</button>
                )}
              </div>
            </li>
          ))}
        </ul>
        {saved && <p class="notice" role="status">{saved}</p>}
      </section>

      <section class="card" aria-labelledby="client-form-h">
        <h2 id="client-form-h">{editing === null ? 'Add a client' : `Edit “${editing}”`}</h2>
        <form class="edit-form" onSubmit={submit} noValidate>
          {editing === null && (
            <Text id="client-name" label="Name" value={form.name} error={errors.name}
              hint="Letters a–z, digits, - and _." onInput={(v) => setForm({ ...form, name: v })} />
          )}
          <Lines id="client-ids" label="Addresses" value={form.ids} error={errors.ids}
            hint={<>One per line: an address (<code>192.168.1.20</code>), a network (<code>192.168.1.0/24</code>) or a DoH/DoT client id (<code>id:phone</code>).</>}
            onInput={(v) => setForm({ ...form, ids: v })} />
          <CheckList id="client-groups" label="Groups" options={groups} value={form.groups} error={errors.groups}
            hint="None: the default group." empty="Only the default group exists."
            onToggle={(n, on) => setForm({ ...form, groups: toggle(form.groups, n, on, groups) })} />
          {errors.form && <p class="error" role="alert">{errors.form}</p>}
          <div class="actions">
            <button type="submit" disabled={busy}>{editing === null ? 'Add client' : 'Save client'}</button>
            {editing !== null && <button type="button" class="ghost" onClick={reset}>Cancel</button>}
          </div>
        </form>
      </section>
    </>
  );
}
