import { z } from 'zod';
import { ErrorBody } from './common';
import { NO_CONTROL, notBlank } from '../../lib/text';

/** 1 to 200 characters, not blank, no control characters. */
export const FolderName = notBlank(z.string().min(1).max(200).regex(NO_CONTROL, 'must not contain control characters')).meta({ description: 'Folder name, 1 to 200 characters; unique among its siblings (case-sensitive)' });

export const Folder = z
  .object({
    id: z.string().meta({ example: 'fld_3f2a9c0d1e4b5a6978c0d1e2' }),
    name: z.string(),
    parent_id: z.string().nullable(),
    path: z.string().meta({ description: "Names from the top, e.g. '/Policies/Returns'", example: '/Policies/Returns' }),
    created_at: z.string().meta({ format: 'date-time' }),
    updated_at: z.string().meta({ format: 'date-time' }),
  })
  .meta({ id: 'Folder' });

export const FolderList = z.object({ folders: z.array(Folder) }).meta({ id: 'FolderList' });

export const ListFoldersQuery = z.object({
  parent_id: z.string().min(1).max(100).optional().meta({ description: 'List the subfolders of this folder; omit for the top level' }),
});

export const CreateFolderBody = z
  .object({
    name: FolderName,
    parent_id: z.string().min(1).max(100).nullable().optional().meta({ description: 'Parent folder; omit (or null) for the top level' }),
  })
  .strict();

export const RenameFolderBody = z.object({ name: FolderName }).strict();

export const AffectedAgent = z.object({ id: z.string(), name: z.string(), status: z.literal('published') });

export const DeleteFolderResult = z
  .object({
    success: z.literal(true),
    affected_agents: z.array(AffectedAgent).meta({
      description: 'Published agents whose knowledge-base selection still names the folder (their selections are not modified)',
    }),
  })
  .meta({ id: 'DeleteFolderResult' });

export const FolderNotEmpty = ErrorBody.extend({ files: z.number().int(), subfolders: z.number().int() }).meta({
  id: 'FolderNotEmptyError',
  description: 'folder_not_empty, with the counts of what the folder holds',
});
