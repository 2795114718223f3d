import type { ReactNode } from 'react';

export interface Column<T> {
  /** The column's heading, also said before each cell on a phone, where rows stack as cards. */
  header: string;
  cell: (row: T) => ReactNode;
  /** The cell that names the row (a <th scope="row">). */
  rowHeader?: boolean;
  /** A heading only screen readers need (an actions column). */
  hideHeader?: boolean;
  className?: string;
}

/**
 * A table of rows. Wide screens see a table; below 640 px each row is a card of labelled lines (styles.css), so a
 * phone reads it without scrolling sideways. The roles are explicit because a table restyled as blocks loses its
 * implicit ones in some browsers; screen readers keep rows, headers and cells either way.
 */
export function DataTable<T>({ label, columns, rows, rowKey }: { label: string; columns: Array<Column<T>>; rows: T[]; rowKey: (row: T) => string }) {
  return (
    <div className="table-wrap" role="region" aria-label={label} tabIndex={0}>
      <table className="table" role="table">
        <thead role="rowgroup">
          <tr role="row">
            {columns.map((c) => (
              <th key={c.header} scope="col" role="columnheader">
                {c.hideHeader ? <span className="visually-hidden">{c.header}</span> : c.header}
              </th>
            ))}
          </tr>
        </thead>
        <tbody role="rowgroup">
          {rows.map((row) => (
            <tr key={rowKey(row)} role="row">
              {columns.map((c) =>
                c.rowHeader ? (
                  <th key={c.header} scope="row" role="rowheader" className={c.className}>
                    {c.cell(row)}
                  </th>
                ) : (
                  <td key={c.header} role="cell" className={c.className} data-label={c.hideHeader ? undefined : c.header}>
                    {c.cell(row)}
                  </td>
                ),
              )}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
