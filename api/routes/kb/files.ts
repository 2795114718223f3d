import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import { z } from 'zod';
import type { Services } from '../../../app/services';
import { readSingleFile } from '../../multipart';
import { authOf } from '../../types';
import { sendStoredBytes } from '../../stored-bytes';
import { authErrors, ErrorBody, idParam, StoredBytes } from '../../schemas/common';
import { KbFile, KbFileList, ListFilesQuery, MoveFileBody, SearchBody, SearchResult, UploadForm } from '../../schemas/files';

const FileId = idParam('file');

const tags = ['Knowledge base'];

export const fileRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'files' | 'blobs' | 'search'>; maxUploadBytes?: number }> = async (app, opts) => {
  const files = opts.services.files;
  const maxBytes = opts.maxUploadBytes ?? 200 * 1024 * 1024;

  app.post('/api/v1/kb/files', {
    config: { scope: 'kb:write' },
    schema: {
      operationId: 'uploadFile',
      summary: 'Upload a document (multipart/form-data: file, name?, folder_id?); indexing runs in the background',
      tags,
      consumes: ['multipart/form-data'],
      body: UploadForm.optional(),
      response: {
        201: KbFile,
        ...authErrors,
        404: ErrorBody.meta({ description: 'folder_not_found' }),
        413: ErrorBody.meta({ description: 'payload_too_large: over 200 MB' }),
        415: ErrorBody.meta({ description: 'unsupported_mime: the bytes are not an accepted type' }),
      },
    },
    // The multipart stream is read by the handler, not validated as a JSON body.
    validatorCompiler: () => (data) => ({ value: data }),
    handler: async (request, reply) => {
      const { staged, fileName, fields } = await readSingleFile(request, opts.services.blobs, maxBytes);
      return reply.code(201).send(await files.upload(authOf(request).workspaceId, { staged, fileName, name: fields.name, folderId: fields.folder_id || null }));
    },
  });

  app.get('/api/v1/kb/files', {
    config: { scope: 'kb:read' },
    schema: { operationId: 'listFiles', summary: 'List current file versions, newest first', tags, querystring: ListFilesQuery, response: { 200: KbFileList, ...authErrors } },
    handler: async (request) =>
      files.list(authOf(request).workspaceId, { folderId: request.query.folder_id ?? null, status: request.query.status, limit: request.query.limit, cursor: request.query.cursor }),
  });

  app.get('/api/v1/kb/files/:id', {
    config: { scope: 'kb:read' },
    schema: { operationId: 'getFile', summary: 'Get a file (poll until active or error)', tags, params: FileId, response: { 200: KbFile, ...authErrors, 404: ErrorBody } },
    handler: async (request) => files.get(authOf(request).workspaceId, request.params.id),
  });

  app.get('/api/v1/kb/files/:id/download', {
    config: { scope: 'kb:read' },
    schema: {
      operationId: 'downloadFile',
      summary: 'Download the original bytes',
      tags,
      params: FileId,
      description:
        'Always an attachment with the stored name, `X-Content-Type-Options: nosniff` and `Content-Security-Policy: sandbox`; the content type is the stored one when it is a format browsers do not run (HTML, SVG, XML are served as application/octet-stream). The saved name\'s extension is the served type\'s (PNG bytes named `evil.html` download as `evil.png`; application/octet-stream as `.bin`).',
      response: {
        200: StoredBytes.meta({ description: 'The original bytes' }),
        ...authErrors,
        404: ErrorBody,
        410: ErrorBody.meta({ description: 'content_gone: the file is listed but its bytes are no longer stored' }),
      },
    },
    handler: async (request, reply) => {
      const { file, blob } = await files.download(authOf(request).workspaceId, request.params.id);
      return sendStoredBytes(reply, blob, { mime: file.mime_type, name: file.name });
    },
  });

  app.post('/api/v1/kb/files/:id/move', {
    config: { scope: 'kb:write' },
    schema: {
      operationId: 'moveFile',
      summary: 'Move a file (with all its versions) to a folder, or to the root with null',
      tags,
      params: FileId,
      body: MoveFileBody,
      response: { 200: KbFile, ...authErrors, 404: ErrorBody.meta({ description: 'not_found or folder_not_found' }), 409: ErrorBody.meta({ description: 'file_exists' }) },
    },
    handler: async (request) => files.move(authOf(request).workspaceId, request.params.id, request.body.folder_id),
  });

  app.delete('/api/v1/kb/files/:id', {
    config: { scope: 'kb:write' },
    schema: {
      operationId: 'deleteFile',
      summary: 'Delete a file version with its passages and bytes; the previous version becomes current',
      tags,
      params: FileId,
      response: { 204: z.null(), ...authErrors, 404: ErrorBody },
    },
    handler: async (request, reply) => {
      await files.delete(authOf(request).workspaceId, request.params.id);
      return reply.code(204).send(null);
    },
  });

  app.post('/api/v1/kb/search', {
    config: { scope: 'kb:read' },
    schema: {
      operationId: 'searchKnowledgeBase',
      summary: 'Hybrid search (full text + meaning) over current, indexed versions',
      tags,
      body: SearchBody,
      response: {
        200: SearchResult,
        ...authErrors,
        404: ErrorBody.meta({ description: 'folder_not_found or not_found (kb_id)' }),
        503: ErrorBody.meta({ description: 'embeddings_unavailable: the embedding model is missing or its provider unreachable' }),
      },
    },
    handler: async (request) => ({ matches: await opts.services.search.search(authOf(request).workspaceId, request.body) }),
  });
};
