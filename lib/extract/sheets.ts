/**
 * Spreadsheets (XLSX, XLS, ODS via SheetJS; CSV/TSV via csv-parse): one segment per row,
 * "Header1: v1; Header2: v2", with the sheet name and the 1-based row number. The first
 * non-empty row of a sheet is its header row; a sheet with a single row yields that row
 * as plain values.
 */
import type * as XLSXTypes from '@e965/xlsx';
import { decodeText } from './text';
import { assertZipSafe } from './zip';
import type { ChildLimits, DocKind, Segment } from './types';

function cellText(v: unknown): string {
  if (v === null || v === undefined) return '';
  return String(v).replace(/\s+/g, ' ').trim();
}

/** Turns rows (arrays of cell texts with their 1-based row numbers) into segments. */
export function rowsToSegments(rows: Array<{ row: number; cells: string[] }>, sheet: string | undefined, columnName: (i: number) => string): Segment[] {
  const nonEmpty = rows.filter((r) => r.cells.some((c) => c !== ''));
  if (!nonEmpty.length) return [];
  const base = sheet === undefined ? {} : { sheet };
  if (nonEmpty.length === 1) {
    const r = nonEmpty[0];
    return [{ ...base, row: r.row, text: r.cells.filter((c) => c !== '').join('; ') }];
  }
  const header = nonEmpty[0].cells.map((h, i) => h || columnName(i));
  const segments: Segment[] = [];
  for (const r of nonEmpty.slice(1)) {
    const parts: string[] = [];
    r.cells.forEach((value, i) => {
      if (value !== '') parts.push(`${header[i] ?? columnName(i)}: ${value}`);
    });
    if (parts.length) segments.push({ ...base, row: r.row, text: parts.join('; ') });
  }
  return segments;
}

export async function extractWorkbook(buf: Buffer, kind: DocKind, limits: ChildLimits, warnings: string[]): Promise<Segment[]> {
  if (kind === 'xlsx' || kind === 'ods') await assertZipSafe(buf, limits);
  const XLSX = (await import('@e965/xlsx')) as typeof XLSXTypes;
  const wb = XLSX.read(buf, {
    type: 'buffer', dense: true, cellFormula: false, cellHTML: false, cellStyles: false, bookVBA: false, cellDates: true, WTF: false,
  });
  const segments: Segment[] = [];
  for (const name of wb.SheetNames) {
    const ws = wb.Sheets[name];
    if (!ws || !ws['!ref']) continue;
    const range = XLSX.utils.decode_range(ws['!ref']);
    const matrix = XLSX.utils.sheet_to_json<unknown[]>(ws, { header: 1, raw: false, defval: '', blankrows: true, dateNF: 'yyyy-mm-dd' });
    const rows = matrix.map((cells, i) => ({ row: range.s.r + i + 1, cells: (cells ?? []).map(cellText) }));
    segments.push(...rowsToSegments(rows, name, (i) => `Column ${XLSX.utils.encode_col(range.s.c + i)}`));
  }
  if (!segments.length && wb.SheetNames.length) warnings.push('the workbook has no non-empty cells');
  return segments;
}

function guessDelimiter(text: string, fileName: string): string {
  if (/\.tsv$/i.test(fileName)) return '\t';
  const firstLine = text.slice(0, 64 * 1024).split('\n', 1)[0] ?? '';
  const unquoted = firstLine.replace(/"[^"]*"/g, '');
  const candidates = [',', ';', '\t', '|'];
  let best = ',';
  let bestCount = 0;
  for (const d of candidates) {
    const count = unquoted.split(d).length - 1;
    if (count > bestCount) { best = d; bestCount = count; }
  }
  return best;
}

export async function extractCsv(buf: Buffer, fileName: string, warnings: string[]): Promise<Segment[]> {
  const { parse: parseCsv } = await import('csv-parse/sync');
  const { text, encoding } = decodeText(buf);
  if (encoding === null) warnings.push('the file is not valid text; undecodable bytes were replaced');
  const records = parseCsv(text, {
    delimiter: guessDelimiter(text, fileName),
    relax_column_count: true,
    relax_quotes: true,
    skip_empty_lines: false,
    bom: true,
  }) as string[][];
  const rows = records.map((cells, i) => ({ row: i + 1, cells: cells.map(cellText) }));
  return rowsToSegments(rows, undefined, (i) => `Column ${i + 1}`);
}
