import type { EntityManager } from '@mikro-orm/postgresql';
import { BlobHold } from '../../db/entities';
import { newId } from '../../lib/ids';
import type { BlobStore } from '../ports/blob-store';

/**
 * An owner kind of blobs, as its own module answers for it: the store is content-addressed
 * and shared by every workspace, so the same bytes stored by two owners (a knowledge-base
 * file here, a customer's WhatsApp photo in another workspace) are one blob, and a blob is
 * deleted only when no owner of any kind refers to it. Each owner module counts its own rows
 * (KnowledgeBaseRepository.filesOfBlob, UploadService.blobUses, …); the list of every kind is
 * built once, in createRepositories (domain/repositories.ts), and every delete goes through
 * `BlobRefRepository.releaseBlob` (test/api/blob-owners.suite.ts deletes each owner kind next
 * to each other). Content keys rather than per-workspace keys: signed links, `file_id` and
 * msgapp's `sha256` all name the bytes' SHA-256, and existing blobs need no migration.
 */
export interface BlobOwner {
  /** What blobOwners() calls it. */
  name: string;
  /** How many of the owner's rows refer to these bytes (run on the EntityManager given). */
  uses(em: EntityManager, sha256: string): Promise<number>;
}

/**
 * The one data path to `blob_holds`, and the only place that decides whether a blob may
 * be deleted (it asks every owner kind it was given, and its own holds). Every method runs
 * on the EntityManager it is given.
 */
export class BlobRefRepository {
  private readonly owners: readonly BlobOwner[];

  /** `owners`: every other kind of owner of blobs (createRepositories lists them). */
  constructor(owners: readonly BlobOwner[]) {
    this.owners = [...owners, { name: 'hold (voice note being transcribed)', uses: (em, sha256) => em.count(BlobHold, { sha256 }) }];
  }

  /** The kinds of owner that refer to these bytes (empty: none, the blob may go). */
  async blobOwners(em: EntityManager, sha256: string): Promise<string[]> {
    // One after the other: `em` may be a transaction's (withBlobLock), one connection, which runs one query at a time.
    const owning: string[] = [];
    for (const o of this.owners) if ((await o.uses(em, sha256)) > 0) owning.push(o.name);
    return owning;
  }

  /**
   * Deletes the blob unless some owner still refers to it; whether it was deleted. Callers
   * remove their own row first. The check and the delete hold the blob's lock (withBlobLock):
   * a writer that commits the bytes and inserts its row under it (the voice recorder's spool,
   * whose chunks of silence are the same bytes in every call) never loses them. Other writers
   * commit bytes before inserting their row unlocked, so an identical upload committing at this
   * very moment could still lose them: that needs the same bytes sent within milliseconds, and
   * its reader then fails (BlobGoneError) rather than reading wrong data.
   */
  async releaseBlob(em: EntityManager, blobs: BlobStore, sha256: string): Promise<boolean> {
    return withBlobLock(em, sha256, async (tx) => {
      if ((await this.blobOwners(tx, sha256)).length) return false;
      await blobs.delete(sha256);
      return true;
    });
  }

  /**
   * Records an owner with no row of its own (see BlobHold); its id releases it. A voice note's hold has the id of its
   * transcription (`trn_…`, the workflow `transcribe:trn_…`), so a hold its workflow left behind can be found.
   */
  async holdBlob(em: EntityManager, sha256: string, id: string = newId('hold')): Promise<string> {
    await em.fork().insert(BlobHold, { id, sha256 });
    return id;
  }

  /** Holds of these owners (id prefix, such as `trn_`) made before `before`: what a reconciliation checks. */
  async holdsOlderThan(em: EntityManager, prefix: string, before: Date, limit: number): Promise<Array<{ id: string; sha256: string }>> {
    return em.fork().find(BlobHold, { id: { $like: `${prefix}%` }, createdAt: { $lt: before } }, { fields: ['id', 'sha256'], orderBy: { createdAt: 'asc' }, limit });
  }

  /**
   * Drops a hold, then the blob if nothing else refers to it. Without an id (a run started
   * before holds existed) one hold of these bytes goes, if any.
   */
  async releaseHold(em: EntityManager, blobs: BlobStore, sha256: string, holdId?: string): Promise<boolean> {
    const fork = em.fork();
    if (holdId) await fork.nativeDelete(BlobHold, { id: holdId, sha256 });
    else {
      const one = await fork.findOne(BlobHold, { sha256 }, { fields: ['id'], orderBy: { createdAt: 'asc' } });
      if (one) await fork.nativeDelete(BlobHold, { id: one.id });
    }
    return this.releaseBlob(fork, blobs, sha256);
  }
}

/**
 * Runs `fn` in a transaction holding the blob's advisory lock (released at its end): a writer committing the bytes and
 * inserting its owner row inside it, and releaseBlob checking the owners and deleting, never interleave.
 */
export function withBlobLock<T>(em: EntityManager, sha256: string, fn: (tx: EntityManager) => Promise<T>): Promise<T> {
  return em.fork().transactional(async (tx) => {
    // raw SQL: an advisory lock has no ORM form; it serialises a writer's commit-and-row with a release's check-and-delete.
    // eslint-disable-next-line no-restricted-syntax
    await tx.execute(`select pg_advisory_xact_lock(hashtextextended(?, 0))`, [`blob:${sha256}`]);
    return fn(tx);
  });
}
