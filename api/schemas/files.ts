import { z } from 'zod';
import { Cursor } from './common';
import { NON_BLANK_WITHOUT_NUL, notBlank } from '../../lib/text';

const Timestamp = z.string().meta({ format: 'date-time' });

export const KbFile = z
  .object({
    id: z.string().meta({ example: 'file_0a1b2c3d4e5f60718293a4b5' }),
    name: z.string(),
    status: z.enum(['pending', 'processing', 'active', 'error']),
    mime_type: z.string().meta({ description: 'Decided from the bytes, not from the client' }),
    file_size: z.number().int(),
    folder_id: z.string().nullable(),
    chunk_count: z.number().int(),
    version: z.number().int().meta({ description: 'Re-uploading a name into the same folder adds a version; the highest is current' }),
    error_message: z.string().nullable().meta({ description: 'Why indexing failed (status error)' }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'KbFile' });

export const KbFileList = z.object({ files: z.array(KbFile), next_cursor: z.string().nullable() }).meta({ id: 'KbFileList' });

export const ListFilesQuery = z.object({
  limit: z.coerce.number().int().min(1).max(200).default(50),
  folder_id: z.string().min(1).max(100).optional().meta({ description: 'Files in this folder; omit for the root (as the folder listing)' }),
  status: z.enum(['pending', 'processing', 'active', 'error']).optional(),
  cursor: Cursor.optional(),
});

export const MoveFileBody = z.object({ folder_id: z.string().min(1).max(100).nullable() }).strict();

export const UploadForm = z
  .object({
    file: z.unknown().meta({ type: 'string', format: 'binary', minLength: 1, description: 'The document, at most 200 MB (an empty file is 400)' }),
    name: z.string().min(1).max(255).optional().meta({ pattern: NON_BLANK_WITHOUT_NUL, description: 'Display name, 1 to 255 characters, not blank (trimmed); defaults to the file name' }),
    folder_id: z.string().optional().meta({ description: 'Target folder; omitted means the root' }),
  })
  .meta({ id: 'KbUploadForm' });

export const SearchBody = z
  .object({
    query: notBlank(z.string().min(1).max(2000)),
    top_k: z.number().int().min(1).max(20).default(8),
    folder_id: z.string().min(1).max(100).optional().meta({ description: 'Only files in this folder or its subfolders' }),
    kb_id: z.string().min(1).max(100).optional().meta({ description: 'Only this file (a file id); with folder_id, both apply' }),
  })
  .strict();

export const SearchResult = z
  .object({
    matches: z.array(
      z.object({
        id: z.string().meta({ description: 'Passage id' }),
        name: z.string().meta({ description: "The file's name" }),
        score: z.number().min(0).max(1).meta({ description: 'Fused relevance in [0, 1], higher is better' }),
        file_id: z.string(),
        folder_id: z.string().nullable(),
        text: z.string().meta({ description: 'The passage' }),
      }),
    ),
  })
  .meta({ id: 'KbSearchResult' });
