import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import { z } from 'zod';
import { readSingleFile } from '../../multipart';
import { WIDGET_UPLOAD_MAX_BYTES } from '../../../core/widget/uploads';
import { ErrorBody, idString } from '../../schemas/common';
import { tags, widgetErrors } from './common';

const Id = z.string().min(1).max(100);

const UploadForm = z
  .object({
    file: z.unknown().meta({ type: 'string', format: 'binary', description: 'The file, at most 25 MB' }),
    conversation_id: z.string().optional().meta({ description: 'The conversation the file belongs to (from init); required to attach it later unless sent with /send' }),
    customer_id: z.string().optional().meta({ description: 'From init; must be the conversation’s customer when both are given' }),
    workflow_id: z.string().optional().meta({ description: 'Accepted for compatibility; the site decides the agent' }),
  })
  .meta({ id: 'WidgetUploadForm' });

const UploadResult = z
  .object({
    upload_id: z.string().meta({ example: 'upl_0a1b2c3d4e5f60718293a4b5', description: 'Send it in `file_refs` of /send' }),
    file_id: z.string().meta({ description: 'The content’s identity (SHA-256 of the bytes): the same bytes give the same file_id' }),
    file_name: z.string(),
    file_url: z.string().meta({ description: 'Signed download link, valid 24 hours; re-sign with /file_url' }),
    file_key: z.string().meta({ example: 'upload/upl_0a1b2c3d4e5f60718293a4b5', description: 'Durable key for /file_url' }),
    mime_type: z.string().meta({ description: 'Decided from the bytes, not from the client' }),
    status: z.literal('ready'),
  })
  .meta({ id: 'WidgetUpload' });

const UploadStatus = z
  .object({
    upload_id: z.string(),
    file_name: z.string(),
    mime_type: z.string(),
    status: z.enum(['processing', 'ready', 'error']),
    parsed_chars: z.number().int().nullable().meta({ description: 'Length of the extracted text, once ready' }),
    summary: z.string().nullable().meta({ description: 'The text’s first ~200 characters, once ready' }),
    error_message: z.string().nullable().meta({ description: 'Why processing failed (status error)' }),
  })
  .meta({ id: 'WidgetUploadStatus' });

const FileUrlBody = z
  .object({
    conversation_id: Id,
    file_key: z.string().min(1).max(200).meta({ description: '`upload/<upload_id>` or `kb/<file_id>`' }),
  })
  .strict();

const uploadErrors = {
  ...widgetErrors,
  400: ErrorBody.meta({ description: 'missing_site_id, invalid_request, unsupported_type, too_many_files (more than 5 files of the conversation processing)' }),
  403: ErrorBody.meta({ description: 'site_suspended, origin_not_allowed, file_upload_not_enabled' }),
  404: ErrorBody.meta({ description: 'unknown_site, not_found (conversation)' }),
  413: ErrorBody.meta({ description: 'payload_too_large: over 25 MB' }),
  415: ErrorBody.meta({ description: 'unsupported_media_type: not multipart/form-data' }),
  422: ErrorBody.meta({ description: 'extraction_failed: the file could not be read; the upload stays in status error' }),
  503: ErrorBody.meta({ description: 'no_workflow_configured, file_upload_prereq_failed (audio or video without a transcriber)' }),
} as const;


const field = (v: string | undefined) => (v?.trim() ? v.trim() : undefined);

/** Upload, upload status, file_url, transcribe. */
export const uploadRoutes: FastifyPluginAsyncZod = async (app) => {
  const uploads = app.services.uploads;

  app.post('/api/public/widget/upload', {
    config: { site: true },
    schema: {
      operationId: 'widgetUpload',
      summary: 'Upload a file (multipart: file, conversation_id?, customer_id?); answers once its content is extracted',
      tags,
      security: [{ widgetSite: [] }],
      consumes: ['multipart/form-data'],
      body: UploadForm.optional(),
      response: { 200: UploadResult, ...uploadErrors },
    },
    // The multipart stream is read by the handler, not validated as a JSON body.
    validatorCompiler: () => (data) => ({ value: data }),
    handler: async (request) => {
      // Refused before a byte is read when the agent or its toggle does not allow uploads.
      await uploads.admit(request.site!);
      const { staged, fileName, fields } = await readSingleFile(request, app.services.blobs, WIDGET_UPLOAD_MAX_BYTES);
      return uploads.create(request.site!, {
        staged,
        fileName,
        conversationId: field(fields.conversation_id),
        customerId: field(fields.customer_id),
      });
    },
  });

  app.get('/api/public/widget/upload/:upload_id', {
    config: { site: true },
    schema: {
      operationId: 'widgetUploadStatus',
      summary: 'Processing status of an upload',
      tags,
      security: [{ widgetSite: [] }],
      params: z.object({ upload_id: idString('upl') }),
      querystring: z.object({ conversation_id: Id.optional() }),
      response: { 200: UploadStatus, ...widgetErrors, 404: ErrorBody.meta({ description: 'unknown_site, not_found (no such upload for this site and conversation)' }) },
    },
    handler: async (request) => uploads.status(request.site!, request.params.upload_id, request.query.conversation_id),
  });

  app.post('/api/public/widget/file_url', {
    config: { site: true },
    schema: {
      operationId: 'widgetFileUrl',
      summary: 'A freshly signed link for an upload of the conversation or a downloadable knowledge-base file',
      tags,
      security: [{ widgetSite: [] }],
      body: FileUrlBody,
      response: {
        200: z.object({ url: z.string().meta({ description: 'Signed download link, valid 24 hours' }) }).meta({ id: 'WidgetFileUrl' }),
        ...widgetErrors,
        403: ErrorBody.meta({ description: 'site_suspended, origin_not_allowed, forbidden (the key is not of this conversation nor a downloadable knowledge-base file)' }),
      },
    },
    handler: async (request) => uploads.fileUrl(request.site!, request.body.conversation_id, request.body.file_key),
  });

  app.post('/api/public/widget/transcribe', {
    config: { site: true },
    schema: {
      operationId: 'widgetTranscribe',
      summary: 'A voice note to text (multipart: file, audio, at most 25 MB); nothing is stored',
      tags,
      security: [{ widgetSite: [] }],
      consumes: ['multipart/form-data'],
      body: z.object({ file: z.unknown().meta({ type: 'string', format: 'binary', description: 'The recording, at most 25 MB' }) }).meta({ id: 'WidgetTranscribeForm' }).optional(),
      response: {
        200: z.object({ transcript: z.string() }).meta({ id: 'WidgetTranscript' }),
        ...widgetErrors,
        400: ErrorBody.meta({ description: 'missing_site_id, invalid_request, not_audio' }),
        413: ErrorBody.meta({ description: 'payload_too_large: over 25 MB' }),
        415: ErrorBody.meta({ description: 'unsupported_media_type: not multipart/form-data' }),
        422: ErrorBody.meta({ description: 'empty_transcript: no speech found' }),
        502: ErrorBody.meta({ description: 'transcription_failed: the transcription provider failed' }),
        503: ErrorBody.meta({ description: 'transcription_unavailable: no transcriber configured' }),
      },
    },
    validatorCompiler: () => (data) => ({ value: data }),
    handler: async (request) => {
      const { staged, fileName } = await readSingleFile(request, app.services.blobs, WIDGET_UPLOAD_MAX_BYTES);
      return uploads.transcribe({ staged, fileName });
    },
  });
};
