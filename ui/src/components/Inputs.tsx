// Labelled inputs for the edit pages, each tied to its hint and to the server's error for it
// (announced, aria-invalid, aria-describedby), like components/Field but for optional fields,
// lists (a textarea, one entry per line), choices and check lists.
import { ComponentChildren } from 'preact';

function describedBy(id: string, hint?: unknown, error?: string): string | undefined {
  return [hint ? `${id}-hint` : '', error ? `${id}-err` : ''].filter(Boolean).join(' ') || undefined;
}

function Hint({ id, hint }: { id: string; hint?: ComponentChildren }) {
  return hint ? <p class="hint" id={`${id}-hint`}>{hint}</p> : null;
}

export function FieldError({ id, error }: { id: string; error?: string }) {
  return error ? <p class="error" id={`${id}-err`} role="alert">{error}</p> : null;
}

interface Base { id: string; label: string; error?: string; hint?: ComponentChildren }

export function Text(p: Base & { value: string; onInput: (v: string) => void; optional?: boolean; inputMode?: string }) {
  return (
    <div class="field">
      <label for={p.id}>{p.label}</label>
      <Hint id={p.id} hint={p.hint} />
      <input id={p.id} name={p.id} type="text" value={p.value} required={!p.optional} spellcheck={false}
        autocomplete="off" inputMode={p.inputMode as any} aria-invalid={p.error ? 'true' : undefined}
        aria-describedby={describedBy(p.id, p.hint, p.error)}
        onInput={(e) => p.onInput((e.currentTarget as HTMLInputElement).value)} />
      <FieldError id={p.id} error={p.error} />
    </div>
  );
}

export function Lines(p: Base & { value: string; onInput: (v: string) => void; rows?: number }) {
  return (
    <div class="field">
      <label for={p.id}>{p.label}</label>
      <Hint id={p.id} hint={p.hint} />
      <textarea id={p.id} name={p.id} value={p.value} rows={p.rows ?? 3} spellcheck={false}
        autocomplete="off" aria-invalid={p.error ? 'true' : undefined}
        aria-describedby={describedBy(p.id, p.hint, p.error)}
        onInput={(e) => p.onInput((e.currentTarget as HTMLTextAreaElement).value)} />
      <FieldError id={p.id} error={p.error} />
    </div>
  );
}

/** `labels[i]`, when given, is the text shown for `choices[i]` (the value sent stays the choice). */
export function Choice(p: Base & { value: string; choices: readonly string[]; labels?: readonly string[]; onChange: (v: string) => void }) {
  return (
    <div class="field">
      <label for={p.id}>{p.label}</label>
      <Hint id={p.id} hint={p.hint} />
      <select id={p.id} name={p.id} value={p.value} aria-invalid={p.error ? 'true' : undefined}
        aria-describedby={describedBy(p.id, p.hint, p.error)}
        onChange={(e) => p.onChange((e.currentTarget as HTMLSelectElement).value)}>
        {p.choices.map((c, i) => <option key={c} value={c}>{p.labels?.[i] ?? c}</option>)}
      </select>
      <FieldError id={p.id} error={p.error} />
    </div>
  );
}

export function Check(p: Base & { checked: boolean; onChange: (v: boolean) => void }) {
  return (
    <div class="field">
      <label class="inline" for={p.id}>
        <input id={p.id} name={p.id} type="checkbox" checked={p.checked}
          aria-invalid={p.error ? 'true' : undefined} aria-describedby={describedBy(p.id, p.hint, p.error)}
          onChange={(e) => p.onChange((e.currentTarget as HTMLInputElement).checked)} /> {p.label}
      </label>
      <Hint id={p.id} hint={p.hint} />
      <FieldError id={p.id} error={p.error} />
    </div>
  );
}

/** A set of checkboxes in a fieldset; the error belongs to the whole set. */
export function CheckList(p: Base & { options: string[]; value: string[]; onToggle: (name: string, on: boolean) => void; empty: string }) {
  return (
    <fieldset class="field checks" id={p.id} aria-invalid={p.error ? 'true' : undefined}
      aria-describedby={describedBy(p.id, p.hint, p.error)} tabIndex={-1}>
      <legend>{p.label}</legend>
      <Hint id={p.id} hint={p.hint} />
      {p.options.length === 0 && <p class="muted">{p.empty}</p>}
      {p.options.map((o) => (
        <label class="inline" key={o}>
          <input type="checkbox" name={`${p.id}-${o}`} checked={p.value.includes(o)}
            onChange={(e) => p.onToggle(o, (e.currentTarget as HTMLInputElement).checked)} /> {o}
        </label>
      ))}
      <FieldError id={p.id} error={p.error} />
    </fieldset>
  );
}

/** Focus the field a refusal belongs to once it is drawn. */
export function focusLater(id: string): void {
  setTimeout(() => document.getElementById(id)?.focus(), 0);
}
