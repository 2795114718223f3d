import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { createdAt, p } from './common';

/**
 * An owner of stored bytes that has no row of its own (a widget voice note while it is
 * transcribed): while the hold exists, no other owner's delete removes the blob.
 */
export const BlobHold = defineEntity({
  name: 'BlobHold',
  tableName: 'blob_holds',
  properties: {
    id: p.text().primary(),
    sha256: p.text(),
    createdAt: createdAt(),
  },
});
export type IBlobHold = InferEntity<typeof BlobHold>;
