// The Groups page: GET/POST /api/groups, PUT/DELETE /api/groups/<name>. A group picks the list
// sources its clients get and whether they are filtered at all. The loader validates (names,
// unknown sources); its refusal is shown at the field.
import { useEffect, useState } from 'preact/hooks';
import { Api, describe } from '../api';
import { locate } from '../forms';
import { GROUP_FIELDS, Group, GroupForm, emptyGroup, groupBody, groupForm, toggle } from '../config';
import { Check, CheckList, Text, focusLater } from '../components/Inputs';
import './edit.css';

type Errors = Partial<Record<'name' | 'sources' | 'filtering' | 'form', string>>;
const IDS: Record<string, string> = { name: 'group-name', sources: 'group-sources', filtering: 'group-filtering' };

export function Groups({ api }: { api: Api }) {
  const [groups, setGroups] = useState<Group[] | null>(null);
  const [sources, setSources] = useState<string[]>([]);
  const [loadErr, setLoadErr] = useState('');
  const [editing, setEditing] = useState<string | null>(null);
  const [form, setForm] = useState<GroupForm>(emptyGroup());
  const [errors, setErrors] = useState<Errors>({});
  const [busy, setBusy] = useState(false);
  const [saved, setSaved] = useState('');
  const [removing, setRemoving] = useState<string | null>(null);

  useEffect(() => {
    api.get<{ groups: Group[] }>('/api/groups').then((r) => setGroups(r.groups), (e) => setLoadErr(describe(e)));
    api.get<{ sources: { name: string }[] }>('/api/filter/sources')
      .then((r) => setSources(r.sources.map((s) => s.name)), (e) => setLoadErr(describe(e)));
  }, []);

  const reset = () => {
    setEditing(null);
    setForm(emptyGroup());
    setErrors({});
  };

  const submit = async (ev: Event) => {
    ev.preventDefault();
    setBusy(true);
    setErrors({});
    setSaved('');
    try {
      const body = groupBody(form, editing !== null);
      const r = editing === null
        ? await api.post<{ groups: Group[] }>('/api/groups', body)
        : await api.request<{ groups: Group[] }>('PUT', `/api/groups/${encodeURIComponent(editing)}`, body);
      setGroups(r.groups);
      setSaved(editing === null ? `Added the group “${form.name.trim()}”.` : `Saved the group “${editing}”.`);
      reset();
    } catch (e) {
      const l = locate(e, 'groups', GROUP_FIELDS, editing === null ? 'name' : null);
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
      const r = await api.request<{ groups: Group[] }>('DELETE', `/api/groups/${encodeURIComponent(name)}`);
      setGroups(r.groups);
      setSaved(`Removed the group “${name}”.`);
      if (editing === name) reset();
      document.getElementById('groups-h')?.focus();
    } catch (e) {
      setErrors({ form: describe(e) });
    } finally {
      setRemoving(null);
    }
  };

  const startEdit = (g: Group) => {
    setEditing(g.name);
    setForm(groupForm(g));
    setErrors({});
    setSaved('');
    focusLater('group-filtering');
  };

  return (
    <>
      <h1>Groups</h1>
      <section class="card" aria-labelledby="groups-h">
        <h2 id="groups-h" tabIndex={-1}>Groups of clients</h2>
        <p class="muted">A client gets the lists of its groups. Clients in no group are in “default”.</p>
        {loadErr && <p class="error" role="alert">{loadErr}</p>}
        {groups === null && !loadErr && <p aria-live="polite">Loading…</p>}
        <ul class="items" data-testid="groups">
          {(groups ?? []).map((g) => (
            <li key={g.name} class="item" data-group={g.name}>
              <div class="what">
                <strong>{g.name}</strong>
                <p class="hint">
                  {g.filtering ? 'Filtered' : 'Not filtered'}
                  {' · lists: '}{g.effective_sources.length ? g.effective_sources.join(', ') : 'none'}
                </p>
              </div>
              <div class="actions">
                <button type="button" class="ghost" onClick={() => startEdit(g)} aria-label={`Edit ${g.name}`}>Edit</button>
                {g.name !== 'default' && (removing === g.name ? (
                  <>
                    <button type="button" class="danger" onClick={() => void remove(g.name)}
                      aria-label={`Confirm: remove ${g.name}`}>Confirm remove</button>
                    <button type="button" class="ghost" onClick={() => setRemoving(null)}>Keep</button>
                  </>
                ) : (
                  <button type="button" class="ghost" onClick={() => setRemoving(g.name)} aria-label={`Remove ${g.name}`}>Remove</button>
                ))}
              </div>
            </li>
          ))}
        </ul>
        {saved && <p class="notice" role="status">{saved}</p>}
      </section>

      <section class="card" aria-labelledby="group-form-h">
        <h2 id="group-form-h">{editing === null ? 'Add a group' : `Edit “${editing}”`}</h2>
        <form class="edit-form" onSubmit={submit} noValidate>
          {editing === null && (
            <Text id="group-name" label="Name" value={form.name} error={errors.name}
              hint="Letters a–z, digits, - and _." onInput={(v) => setForm({ ...form, name: v })} />
          )}
          <CheckList id="group-sources" label="Lists" options={sources} value={form.sources} error={errors.sources}
            hint="The list sources this group uses, besides those that name the group themselves."
            empty="No list sources yet: add them on the Lists page."
            onToggle={(n, on) => setForm({ ...form, sources: toggle(form.sources, n, on, sources) })} />
          <Check id="group-filtering" label="Filter this group's clients" checked={form.filtering} error={errors.filtering}
            onChange={(v) => setForm({ ...form, filtering: v })} />
          {errors.form && <p class="error" role="alert">{errors.form}</p>}
          <div class="actions">
            <button type="submit" disabled={busy}>{editing === null ? 'Add group' : 'Save group'}</button>
            {editing !== null && <button type="button" class="ghost" onClick={reset}>Cancel</button>}
          </div>
        </form>
      </section>
    </>
  );
}
