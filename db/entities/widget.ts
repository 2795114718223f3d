import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { createdAt, createdAtMs, p, updatedAt } from './common';

/** A web-chat site: the public id a widget presents, its allowed origins and its signing secrets. */
export const Site = defineEntity({
  name: 'Site',
  tableName: 'sites',
  properties: {
    id: p.text().primary(),
    workspaceId: p.text(),
    agentId: p.text(),
    allowedOrigins: p.array(),
    status: p.enum(['active', 'suspended'] as const).columnType('text'),
    secretSealed: p.text(),
    /** After a rotation the previous secret still verifies user_hash until it expires. */
    previousSecretSealed: p.text().nullable(),
    previousExpiresAt: p.datetime().nullable(),
    /** The page commands (`ui:command`) this site's page handles; empty: none are sent (the default). */
    uiCommands: p.array().defaultRaw(`'{}'`),
    /** The widget's look and language; null: the default (domain/widget/appearance.ts). */
    brandColor: p.text().nullable(),
    launcherPosition: p.enum(['right', 'left'] as const).columnType('text').nullable(),
    launcherLabel: p.text().nullable(),
    theme: p.enum(['light', 'dark', 'auto'] as const).columnType('text').nullable(),
    language: p.enum(['auto', 'en', 'es', 'fr', 'de', 'pt', 'ar'] as const).columnType('text').nullable(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
});
export type ISite = InferEntity<typeof Site>;

export const WidgetUpload = defineEntity({
  name: 'WidgetUpload',
  tableName: 'widget_uploads',
  properties: {
    id: p.text().primary(),
    workspaceId: p.text(),
    /** Null only for a file a person attached to a msgapp reply (a conversation without a site). */
    siteId: p.text().nullable(),
    conversationId: p.text().nullable(),
    fileName: p.text(),
    mimeType: p.text(),
    sizeBytes: p.bigint('number'),
    blobKey: p.text(),
    status: p.enum(['processing', 'ready', 'error'] as const).columnType('text'),
    content: p.text().nullable(),
    parsedChars: p.integer().nullable(),
    summary: p.text().nullable(),
    errorMessage: p.text().nullable(),
    createdAt: createdAtMs(),
    updatedAt: updatedAt(),
  },
});
export type IWidgetUpload = InferEntity<typeof WidgetUpload>;

/** The passages of a long upload, with the vector of the model that made it. */
export const WidgetUploadChunk = defineEntity({
  name: 'WidgetUploadChunk',
  tableName: 'widget_upload_chunks',
  properties: {
    uploadId: p.text().primary(),
    ord: p.integer().primary(),
    text: p.text(),
    embedding: p.array<number>(Number, String).columnType('real[]').nullable(),
    embeddingModel: p.text().nullable(),
  },
});
export type IWidgetUploadChunk = InferEntity<typeof WidgetUploadChunk>;
