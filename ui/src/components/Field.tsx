// A labelled input whose error (the server's `field`) is announced and tied to it.
interface Props {
  id: string;
  label: string;
  type?: string;
  value: string;
  onInput: (v: string) => void;
  autocomplete?: string;
  hint?: string;
  error?: string;
  autofocus?: boolean;
  minLength?: number;
  inputMode?: string;
}

export function Field(p: Props) {
  const described = [p.hint ? `${p.id}-hint` : '', p.error ? `${p.id}-err` : '']
    .filter(Boolean)
    .join(' ');
  return (
    <div class="field">
      <label for={p.id}>{p.label}</label>
      {p.hint && (
        <p class="hint" id={`${p.id}-hint`}>
          {p.hint}
        </p>
      )}
      <input
        id={p.id}
        name={p.id}
        type={p.type ?? 'text'}
        value={p.value}
        required
        minLength={p.minLength}
        inputMode={p.inputMode as any}
        autocomplete={p.autocomplete}
        autoFocus={p.autofocus}
        spellcheck={false}
        aria-invalid={p.error ? 'true' : undefined}
        aria-describedby={described || undefined}
        onInput={(e) => p.onInput((e.currentTarget as HTMLInputElement).value)}
      />
      {p.error && (
        <p class="error" id={`${p.id}-err`} role="alert">
          {p.error}
        </p>
      )}
    </div>
  );
}
