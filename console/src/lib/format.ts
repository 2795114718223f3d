const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

/** A stored instant as the person's locale writes it; `never` for none. */
export function when(iso: string | null | undefined, never = 'Never'): string {
  if (!iso) return never;
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : dateTime.format(date);
}

/** Copies text to the clipboard without ever putting it in the page. */
export async function copyToClipboard(text: string): Promise<void> {
  if (!navigator.clipboard) throw new Error('The clipboard is not available here (it needs https or localhost).');
  await navigator.clipboard.writeText(text);
}
