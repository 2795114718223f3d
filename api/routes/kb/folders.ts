import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import type { Services } from '../../../app/services';
import { authOf } from '../../types';
import { authErrors, ErrorBody, idParam } from '../../schemas/common';
import {
  CreateFolderBody,
  DeleteFolderResult,
  Folder,
  FolderList,
  FolderNotEmpty,
  ListFoldersQuery,
  RenameFolderBody,
} from '../../schemas/folders';

const FldId = idParam('fld');

const tags = ['Knowledge base'];

export const folderRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'folders'> }> = async (app, opts) => {
  app.get('/api/v1/kb/folders', {
    config: { scope: 'kb:read' },
    schema: {
      operationId: 'listFolders',
      summary: 'List folders (one level, sorted by name)',
      tags,
      querystring: ListFoldersQuery,
      response: { 200: FolderList, ...authErrors, 404: ErrorBody.meta({ description: 'not_found: parent_id names no folder' }) },
    },
    handler: async (request) => ({
      folders: await opts.services.folders.list(authOf(request).workspaceId, request.query.parent_id ?? null),
    }),
  });

  app.post('/api/v1/kb/folders', {
    config: { scope: 'kb:write' },
    schema: {
      operationId: 'createFolder',
      summary: 'Create a folder',
      tags,
      body: CreateFolderBody,
      response: {
        201: Folder,
        ...authErrors,
        404: ErrorBody.meta({ description: 'parent_not_found' }),
        409: ErrorBody.meta({ description: 'folder_exists: a sibling has that name; idempotency_conflict' }),
      },
    },
    handler: async (request, reply) => {
      const folder = await opts.services.folders.create(authOf(request).workspaceId, request.body.name, request.body.parent_id ?? null);
      return reply.code(201).send(folder);
    },
  });

  app.patch('/api/v1/kb/folders/:id', {
    config: { scope: 'kb:write' },
    schema: {
      operationId: 'renameFolder',
      summary: 'Rename a folder (only the name changes; descendant paths follow)',
      tags,
      params: FldId,
      body: RenameFolderBody,
      response: { 200: Folder, ...authErrors, 404: ErrorBody, 409: ErrorBody.meta({ description: 'folder_exists' }) },
    },
    handler: async (request) => opts.services.folders.rename(authOf(request).workspaceId, request.params.id, request.body.name),
  });

  app.delete('/api/v1/kb/folders/:id', {
    config: { scope: 'kb:write' },
    schema: {
      operationId: 'deleteFolder',
      summary: 'Delete an empty folder (never cascades)',
      tags,
      params: FldId,
      response: { 200: DeleteFolderResult, ...authErrors, 404: ErrorBody, 409: FolderNotEmpty },
    },
    handler: async (request) => opts.services.folders.delete(authOf(request).workspaceId, request.params.id),
  });
};
