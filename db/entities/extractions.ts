import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { createdAtMs, p, updatedAt } from './common';

/**
 * One structured extraction (POST /documents/extract_structured): the request (file,
 * schema, prompt), the text read from the file, and the outcome. Unique per workspace
 * and request hash (file SHA-256 + schema + prompt): the same request in the same
 * workspace is answered from the stored result; another workspace never sees it.
 */
export const StructuredExtraction = defineEntity({
  name: 'StructuredExtraction',
  tableName: 'structured_extractions',
  properties: {
    id: p.text().primary(),
    workspaceId: p.text(),
    requestHash: p.text(),
    /** SHA-256 of the file's bytes: their address in the blob store. */
    blobKey: p.text(),
    fileName: p.text(),
    mimeType: p.text(),
    kind: p.text(),
    schema: p.json<Record<string, unknown>>(),
    prompt: p.text().nullable(),
    status: p.enum(['running', 'succeeded', 'failed'] as const).columnType('text'),
    /** The document's text, stored by the first step so later steps (and retries) read it without extracting again. */
    text: p.text().nullable(),
    chunkCount: p.integer().nullable(),
    /** `json`, not `jsonb`: the answer keeps its keys in the model's order (the schema's), as it was validated. */
    data: p.json<unknown>().columnType('json').nullable(),
    model: p.text().nullable(),
    /** Why it failed (status failed): `unreadable`, `no_valid_output`, `model`, `internal`. */
    failure: p.text().nullable(),
    errorMessage: p.text().nullable(),
    /** Usage, for billing: tokens over every model call (repairs included) and pages read. */
    promptTokens: p.integer().default(0),
    completionTokens: p.integer().default(0),
    modelCalls: p.integer().default(0),
    pages: p.integer().nullable(),
    createdAt: createdAtMs(),
    updatedAt: updatedAt(),
  },
});
export type IStructuredExtraction = InferEntity<typeof StructuredExtraction>;
