import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import { z } from 'zod';
import { ApiError } from '../http-errors';
import { EXTRACT_MAX_BYTES, MAX_PROMPT_CHARS } from '../../domain/extraction/extractions';
import { MAX_SCHEMA_BYTES } from '../../domain/extraction/schema';
import type { FastifyRequest } from 'fastify';
import type { Services } from '../../app/services';
import type { ReceivedDocument } from '../../domain/extraction/documents';
import { readSingleFile } from '../multipart';
import { authErrors, ErrorBody } from '../schemas/common';
import { authOf } from '../types';

const tags = ['Documents'];

const ExtractForm = z
  .object({
    // A multipart form: read by the handler, so these schemas document what it checks (the empty file, the missing schema, the prompt's length).
    file: z.unknown().meta({ type: 'string', format: 'binary', minLength: 1, description: 'PDF, DOCX, TXT, PNG, JPEG or WEBP, at most 25 MB; the type is decided from the bytes' }),
    schema: z.string().min(1).meta({
      contentMediaType: 'application/json',
      contentSchema: { type: 'object' },
      description: `A JSON Schema (draft 2020-12, or draft-07 by its $schema) serialised as a JSON string, at most ${MAX_SCHEMA_BYTES / 1024} KB; the root must be "type": "object"; $ref only to the schema itself ('#/$defs/…'), not recursive`,
      example: '{"type":"object","properties":{"invoice_number":{"type":"string"},"total":{"type":"number"}},"required":["invoice_number","total"]}',
    }),
    prompt: z.string().max(MAX_PROMPT_CHARS).optional().meta({ description: `Extra instructions for the model, at most ${MAX_PROMPT_CHARS} characters` }),
  })
  // Only these parts: any other field is refused (400 invalid_request naming it), as Stripe refuses an unknown parameter.
  .strict()
  .meta({ id: 'ExtractStructuredForm' });

const ExtractResult = z
  .object({
    data: z.unknown().meta({ description: 'The document’s content shaped to the schema; always valid against it' }),
    model: z.string().meta({ description: 'The model that produced it', example: 'qwen2.5-coder-1.5b-instruct-q4_k_m' }),
  })
  .meta({ id: 'ExtractStructuredResult' });

/** POST /api/v1/documents/extract_structured. */
export const documentRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'documents' | 'blobs'> }> = async (app, opts) => {
  const { blobs } = opts.services;

  /** The form's one file and its fields: over-long fields and unknown parts are refused here, the staged file discarded. */
  const readForm = async (request: FastifyRequest): Promise<ReceivedDocument> => {
    // One byte over the limit tells a schema that is too large from one that fits.
    const { staged, fileName, fields, truncated } = await readSingleFile(request, blobs, EXTRACT_MAX_BYTES, { fieldSize: MAX_SCHEMA_BYTES + 1 });
    if (truncated.length) {
      await blobs.discard(staged);
      if (truncated.includes('schema')) throw new ApiError(400, 'bad_schema', `schema: larger than ${MAX_SCHEMA_BYTES / 1024} KB`);
      throw new ApiError(400, 'invalid_request', `${truncated[0]}: too long`);
    }
    // (`file` sent as a text field is no file: "file: required" says so.)
    const unknown = Object.keys(fields).find((name) => name !== 'schema' && name !== 'prompt' && name !== 'file');
    if (unknown !== undefined) {
      await blobs.discard(staged);
      throw new ApiError(400, 'invalid_request', `body.${unknown.slice(0, 60)}: unknown field (the form takes file, schema and prompt)`);
    }
    return { staged, fileName, schema: fields.schema, prompt: fields.prompt };
  };

  app.post('/api/v1/documents/extract_structured', {
    config: { scope: 'documents:extract' },
    schema: {
      operationId: 'extractStructured',
      summary:
        'A document plus a JSON Schema in, the document’s content shaped to the schema out (multipart: file, schema, prompt?). Runs as a durable workflow; the request waits for it (up to STRUCTURED_WAIT_MS, 300 s by default). The same file, schema and prompt in the same workspace are answered from the stored result.',
      tags,
      consumes: ['multipart/form-data'],
      body: ExtractForm.optional(),
      response: {
        200: ExtractResult,
        ...authErrors,
        400: ErrorBody.meta({
          description:
            'missing_schema; bad_schema (not JSON, not an object, not a valid JSON Schema, or one that cannot be honoured: remote or recursive $ref, too large or deep, unsatisfiable, root not an object; the message says why); invalid_request (no file, an empty file, a prompt too long, a field other than file, schema and prompt)',
        }),
        413: ErrorBody.meta({ description: 'payload_too_large: a file over 25 MB' }),
        415: ErrorBody.meta({ description: 'unsupported_mime: the bytes are not PDF, DOCX, TXT, PNG, JPEG or WEBP; unsupported_media_type: not multipart/form-data' }),
        422: ErrorBody.meta({
          description: 'extraction_failed: no output that satisfies the schema could be produced (after one repair turn), or the file has no text (an image without text), is corrupt, encrypted or too long',
        }),
        500: ErrorBody.meta({ description: 'internal_error' }),
        503: ErrorBody.meta({
          description:
            'llm_not_configured: no extraction model (STRUCTURED_BASE_URL or LLM_BASE_URL); model_unavailable: the model server failed after retries; workflow_unavailable: no workflow service (with workflow_id when it was lost while waiting)',
        }),
        504: ErrorBody.meta({
          description: 'extraction_timeout: not finished within the wait limit; the body has workflow_id and extraction_id, and the same request sent again returns the result once it is done',
        }),
      },
    },
    // The multipart stream is read by the handler, not validated as a JSON body.
    validatorCompiler: () => (data) => ({ value: data }),
    handler: async (request) => opts.services.documents.extract(authOf(request).workspaceId, () => readForm(request)),
  });
};
