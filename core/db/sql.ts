/**
 * A PostgreSQL array literal for a `?::text[]` binding. Knex expands a JS array in raw
 * bindings into a list of values, so arrays travel as one literal instead. Used only by
 * core/widget/uploads.ts's raw statements, until they are converted (issue 12 item 5):
 * remove it then.
 */
export function textArray(values: readonly string[]): string {
  return `{${values.map((v) => `"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`).join(',')}}`;
}
