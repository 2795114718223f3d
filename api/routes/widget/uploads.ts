import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import type { FastifyRequest } from 'fastify';
import type { Services } from '../../../app/services';
import { z } from 'zod';
import { readSingleFile } from '../../multipart';
import { WIDGET_UPLOAD_MAX_BYTES } from '../../../domain/widget/uploads';
import type { ReceivedFile } from '../../../domain/widget/uploads/widget-files';
import type { WidgetWorkQuota } from '../../../lib/ratelimit/work-quota';
import { ErrorBody, idString } from '../../schemas/common';
import { IdentityQuery, UserContext, conversationErrors, identityOf, tags, widgetErrors } from './common';

const Id = z.string().min(1).max(100);

const UploadForm = z
  .object({
    file: z.unknown().meta({ type: 'string', format: 'binary', minLength: 1, description: 'The file, at most 25 MB (an empty file is 400)' }),
    conversation_id: z.string().optional().meta({ description: 'The conversation the file belongs to (from init); required to attach it later unless sent with /send' }),
    customer_id: z.string().optional().meta({ description: 'From init; must be the conversation’s customer when both are given' }),
    workflow_id: z.string().optional().meta({ description: 'Accepted for compatibility; the site decides the agent' }),
    external_id: z.string().optional().meta({ description: 'With user_hash: required for a conversation started by a verified visitor' }),
    user_hash: z.string().optional(),
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
    file_id: z.string().nullable().meta({ description: 'As in the upload answer, once ready; null before' }),
    file_name: z.string(),
    file_url: z.string().nullable().meta({ description: 'A freshly signed download link (24 hours), once ready; null before' }),
    file_key: z.string().nullable().meta({ description: 'Durable key for /file_url, once ready; null before' }),
    mime_type: z.string(),
    status: z.enum(['processing', 'ready', 'error']),
    parsed_chars: z.number().int().nullable().meta({ description: 'Length of the extracted text, once ready; 0 for a file with no text (a photo)' }),
    summary: z.string().nullable().meta({ description: 'The text’s first ~200 characters, once ready (null when there is no text)' }),
    error_message: z.string().nullable().meta({ description: 'Why processing failed (status error)' }),
  })
  .meta({ id: 'WidgetUploadStatus' });

const FileUrlBody = z
  .object({
    conversation_id: Id,
    file_key: z.string().min(1).max(200).meta({ description: '`upload/<upload_id>` or `kb/<file_id>`' }),
    user_context: UserContext.optional().meta({ description: 'Required for a conversation started by a verified visitor' }),
  })
  .strict();

/** The transcriber is the one prerequisite of uploads (audio, video, voice notes). */
const TRANSCRIBER_503 =
  'file_upload_prereq_failed: no transcriber is available (neither TRANSCRIBE_BASE_URL nor the embedded model of npm run models:fetch) or it is failing; missing_credential: the transcription service refused its credential (401/403: set TRANSCRIBE_API_KEY)';

/** The anonymous-work quotas (lib/ratelimit/work-quota.ts), on top of the widget's request limits. */
const FILES_429 = ErrorBody.meta({
  description:
    'rate_limited (Retry-After): more than 300 requests a minute from one client address to the site, more than 30 refused requests a minute from one address, or over the quotas of files (uploads and voice notes together): WIDGET_FILES_IN_FLIGHT_PER_ADDRESS (2) being processed at once per site and client address, WIDGET_FILES_IN_FLIGHT_PER_SITE (10) per site, WIDGET_FILES_PER_ADDRESS_PER_HOUR (60) and WIDGET_FILE_BYTES_PER_ADDRESS_PER_HOUR (200 MB) an hour per address, WIDGET_FILE_BYTES_PER_SITE_PER_DAY (5 GB) a day per site',
});

/** Recordings the embedded transcriber refuses for their length. */
const MEDIA_TOO_LONG_413 =
  'media_too_long: the recording is longer than WIDGET_TRANSCRIBE_MAX_SECONDS (default 300 s; at most TRANSCRIBE_MAX_SECONDS), the most taken from a widget visitor';

const uploadErrors = {
  ...widgetErrors,
  400: ErrorBody.meta({
    description:
      'missing_site_id; invalid_request (a bad field, an empty file, a conversation_id or customer_id not of this site, or a file that cannot be read, such as a PDF of more than UPLOAD_MAX_PDF_PAGES (500) pages: the upload then stays in status error and the body has upload_id); unsupported_type; too_many_files (more than 5 files of the conversation processing)',
  }),
  403: ErrorBody.meta({
    description:
      'site_suspended, origin_not_allowed, file_upload_not_enabled, identity_verification_required (a verified visitor\'s conversation without external_id and user_hash), identity_verification_failed, forbidden (another visitor\'s conversation)',
  }),
  409: ErrorBody.meta({ description: 'upload_cancelled: an operator cancelled its processing (its workflow); the upload stays in status error with that reason and the body has upload_id: upload the file again' }),
  413: ErrorBody.meta({ description: `payload_too_large: over 25 MB; ${MEDIA_TOO_LONG_413} (the upload then stays in status error and the body has upload_id)` }),
  415: ErrorBody.meta({ description: 'unsupported_media_type: not multipart/form-data' }),
  429: FILES_429,
  503: ErrorBody.meta({
    description: `no_workflow_configured; ${TRANSCRIBER_503}; workflow_unavailable: this API process has no workflow service to extract the file on (or lost it while waiting: the body then has upload_id, whose status tells how processing ended)`,
  }),
} as const;


const field = (v: string | undefined) => (v?.trim() ? v.trim() : undefined);

/** The identity a multipart request carries as the flat fields `external_id` and `user_hash`. */
const formIdentity = (fields: Record<string, string>) => identityOf({ external_id: field(fields.external_id), user_hash: field(fields.user_hash) });

/** Upload, upload status, file_url, transcribe. */
export const uploadRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'widgetFiles' | 'blobs'>; work: WidgetWorkQuota }> = async (app, opts) => {

  /**
   * Reads the request's one file within the anonymous-work quotas: a place in flight
   * (per site and client address, and per site) and the address's hourly count are taken
   * before a byte is read, the bytes charged once read; 429 rate_limited past any. The
   * lease is the service's to release when the file's processing ends.
   */
  const readWithinQuota = async (request: FastifyRequest): Promise<ReceivedFile> => {
    const site = request.site!;
    const lease = await opts.work.admit(site.id, request.ip);
    try {
      const read = await readSingleFile(request, opts.services.blobs, WIDGET_UPLOAD_MAX_BYTES);
      await opts.work.chargeBytes(site.id, request.ip, read.staged.size).catch(async (err: unknown) => {
        await opts.services.blobs.discard(read.staged);
        throw err;
      });
      const { staged, fileName, fields } = read;
      return { staged, fileName, conversationId: field(fields.conversation_id), customerId: field(fields.customer_id), identity: formIdentity(fields), lease };
    } catch (err) {
      await lease.release();
      throw err;
    }
  };

  app.post('/api/public/widget/upload', {
    config: { site: true },
    schema: {
      operationId: 'widgetUpload',
      summary: 'Upload a file (multipart: file, conversation_id?, customer_id?); answers 201 once its content is extracted (a file with no text, such as a photo, is ready with parsed_chars 0)',
      tags,
      security: [{ widgetSite: [] }],
      consumes: ['multipart/form-data'],
      body: UploadForm.optional(),
      response: { 201: UploadResult, ...uploadErrors },
    },
    // The multipart stream is read by the handler, not validated as a JSON body.
    validatorCompiler: () => (data) => ({ value: data }),
    handler: async (request, reply) => {
      const answer = await opts.services.widgetFiles.upload(request.site!, () => readWithinQuota(request));
      // A creation: 201 (docs/decisions.md "Everywhere").
      return reply.code(201).send(answer);
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
      querystring: z.object({ conversation_id: Id.optional(), ...IdentityQuery }),
      response: {
        200: UploadStatus,
        ...widgetErrors,
        ...conversationErrors,
        404: ErrorBody.meta({ description: 'unknown_site, not_found (no such upload for this site and conversation)' }),
      },
    },
    handler: async (request) =>
      opts.services.widgetFiles.status(request.site!, request.params.upload_id, { conversationId: request.query.conversation_id, identity: identityOf(request.query) }),
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
        403: ErrorBody.meta({
          description:
            'site_suspended, origin_not_allowed, forbidden (the key is not of this conversation nor a downloadable knowledge-base file, or the conversation is not this site\'s or another visitor\'s), identity_verification_required, identity_verification_failed',
        }),
      },
    },
    handler: async (request) => opts.services.widgetFiles.fileUrl(request.site!, request.body.conversation_id, request.body.file_key, request.body.user_context),
  });

  app.post('/api/public/widget/transcribe', {
    config: { site: true },
    schema: {
      operationId: 'widgetTranscribe',
      summary:
        'A voice note to text (multipart: file, audio — WebM/Opus as browsers record it, Ogg, MP3, WAV, M4A — at most 25 MB); transcribed in the worker, nothing is stored',
      tags,
      security: [{ widgetSite: [] }],
      consumes: ['multipart/form-data'],
      body: z
        .object({
          file: z.unknown().meta({ type: 'string', format: 'binary', description: 'The recording, at most 25 MB' }),
          conversation_id: z.string().optional().meta({ description: 'The conversation the note is for, checked like /send when given' }),
          external_id: z.string().optional().meta({ description: 'With user_hash: required for a conversation started by a verified visitor' }),
          user_hash: z.string().optional(),
        })
        .meta({ id: 'WidgetTranscribeForm' })
        .optional(),
      response: {
        200: z.object({ transcript: z.string() }).meta({ id: 'WidgetTranscript' }),
        ...widgetErrors,
        400: ErrorBody.meta({
          description: 'missing_site_id, invalid_request (also a recording that cannot be decoded, or one whose header states it is longer than WIDGET_TRANSCRIBE_MAX_SECONDS, default 300 s), not_audio',
        }),
        413: ErrorBody.meta({ description: `payload_too_large: over 25 MB; ${MEDIA_TOO_LONG_413}` }),
        415: ErrorBody.meta({ description: 'unsupported_media_type: not multipart/form-data' }),
        422: ErrorBody.meta({ description: 'empty_transcript: no speech found (silence is recognised by its loudness, before any transcription)' }),
        429: FILES_429,
        503: ErrorBody.meta({
          description: `${TRANSCRIBER_503}; workflow_unavailable: this API process has no workflow service to transcribe on (or lost it while waiting)`,
        }),
      },
    },
    validatorCompiler: () => (data) => ({ value: data }),
    // Transcription runs in the worker (`transcribe:<trn_id>`), never here.
    handler: async (request) => opts.services.widgetFiles.transcribe(request.site!, () => readWithinQuota(request)),
  });
};
