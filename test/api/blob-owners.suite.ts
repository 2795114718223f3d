import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { ChatMessage, Conversation, Recording, StructuredExtraction, VoiceRecordingChunk, WidgetUpload } from '../../db/entities';
import { newId } from '../../lib/ids';
import type { Transcriber } from '../../lib/extract';
import { signLink } from '../../domain/storage/signed-links';
import { PgRecordingSpool } from '../../domain/voice/spool';
import type { BlobStore, StagedBlob } from '../../domain/ports/blob-store';
import { bearer, createKey, createWorkspace, publishedWebAgent, startTestApp, testBlobs, type TestApp } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';

/**
 * Security report round 2, item 7: the blob store is content-addressed and shared by
 * every owner of bytes in every workspace. For each pair (A, B) of owners holding the same
 * bytes, A in one workspace and B in another, deleting A's owner keeps B's bytes readable
 * (B's signed link still 200; owners without a link: the bytes still stored). Owner kinds:
 * knowledge-base file, widget upload, widget voice note being transcribed, running
 * structured extraction, inbound msgapp media, recording, voice spool chunk. The kinds
 * that have a delete path are the A side: knowledge-base file delete, voice note release,
 * spool release after a recording is saved.
 */
let db: TestDatabase;
let t: TestApp;
let wsA: string;
let wsB: string;
let siteB: string;

const ORIGIN = 'https://shop.example';
/** Voice notes need a transcriber configured; none is called here. */
const idleTranscriber: Transcriber = { transcribe: async () => 'unused' };

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, serviceOptions: { transcriber: idleTranscriber } });
  wsA = await createWorkspace(db.orm, 'Workspace A');
  wsB = await createWorkspace(db.orm, 'Workspace B');
  const auth = bearer((await createKey(t.services, wsB, ['workflows:write', 'workflows:publish'])).key);
  const agentId = await publishedWebAgent(t.app, auth, ORIGIN);
  siteB = (await t.services.sites.create(wsB, agentId, [ORIGIN])).site_id;
}, 60_000);
afterAll(async () => {
  await t?.close();
  await db?.drop();
});

/** A small valid WAV (voice notes must be audio by their bytes), with random samples: fresh bytes for every case. */
function wav(): Buffer {
  const data = randomBytes(800);
  const h = Buffer.alloc(44);
  h.write('RIFF', 0);
  h.writeUInt32LE(36 + data.length, 4);
  h.write('WAVE', 8);
  h.write('fmt ', 12);
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(1, 22);
  h.writeUInt32LE(8000, 24);
  h.writeUInt32LE(16000, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36);
  h.writeUInt32LE(data.length, 40);
  return Buffer.concat([h, data]);
}

const stage = (bytes: Buffer) => testBlobs.stage(Readable.from([bytes]), 1024 * 1024);
const commit = async (bytes: Buffer) => testBlobs.commit(await stage(bytes));
const em = () => db.orm.em.fork();

/** GET of a signed /api/media link: 200 while the bytes are stored, 410 media_gone after. */
async function fetchLink(url: string): Promise<number> {
  return (await t.app.inject({ method: 'GET', url: new URL(url).pathname })).statusCode;
}

/** For owners without a link: the answer their link would give. */
async function stored(sha256: string): Promise<number> {
  const blob = await testBlobs.read(sha256);
  blob?.stream.destroy();
  return blob ? 200 : 410;
}

interface Owner {
  /** Whether the bytes are readable for this owner: its link's status (or 200 / 410 for stored / gone). */
  readable(): Promise<number>;
  /** Deletes the owner through its own code path (only the kinds that have one). */
  remove?(): Promise<void>;
}

type OwnerKind = 'kb file' | 'widget upload' | 'voice note' | 'extraction input' | 'msgapp inbound media' | 'recording' | 'voice spool chunk';

const OWNERS: Record<OwnerKind, (ws: string, bytes: Buffer) => Promise<Owner>> = {
  'kb file': async (ws, bytes) => {
    const file = await t.services.files.create(ws, { staged: await stage(bytes), name: `${newId('doc')}.wav`, folderId: null, mime: 'audio/wav', kind: 'audio' });
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    const url = t.services.uploadSearch.signKbFile({ sha256, mime_type: file.mime_type, name: file.name });
    return { readable: () => fetchLink(url), remove: () => t.services.files.delete(ws, file.id) };
  },
  'widget upload': async (ws, bytes) => {
    const sha256 = await commit(bytes);
    const id = newId('upl');
    await em().insert(WidgetUpload, { id, workspaceId: ws, siteId: siteB, conversationId: null, fileName: 'photo.wav', mimeType: 'audio/wav', sizeBytes: bytes.length, blobKey: sha256, status: 'ready' });
    const [att] = await t.services.uploads.describe([id]);
    return { readable: () => fetchLink(att.url) };
  },
  'voice note': async (_ws, bytes) => {
    const note = await t.services.voiceNotes.storeVoiceNote({ staged: await stage(bytes), fileName: 'note.wav' });
    return { readable: () => stored(note.blobKey), remove: () => t.services.voiceNotes.releaseVoiceNote(note.blobKey, note.holdId) };
  },
  'extraction input': async (ws, bytes) => {
    const sha256 = await commit(bytes);
    await em().insert(StructuredExtraction, {
      id: newId('ext'),
      workspaceId: ws,
      requestHash: randomBytes(32).toString('hex'),
      blobKey: sha256,
      fileName: 'form.wav',
      mimeType: 'audio/wav',
      kind: 'audio',
      schema: { type: 'object' },
      prompt: null,
      status: 'running',
    });
    return { readable: () => stored(sha256) };
  },
  'msgapp inbound media': async (ws, bytes) => {
    const sha256 = await commit(bytes);
    const conversationId = newId('conv');
    await em().insert(Conversation, { id: conversationId, workspaceId: ws, channel: 'msgapp', status: 'open' });
    const url = signLink(t.services.box, 'https://concierge.example', { sha256, mime: 'audio/ogg', name: 'voice.ogg' });
    await em().insert(ChatMessage, { id: newId('msg'), workspaceId: ws, conversationId, role: 'user', attachments: [{ type: 'audio', mime_type: 'audio/ogg', sha256, url, size: bytes.length }] });
    return { readable: () => fetchLink(url) };
  },
  recording: async (ws, bytes) => {
    const sha256 = await commit(bytes);
    const callId = newId('call');
    await em().insert(Recording, {
      id: newId('rec'),
      workspaceId: ws,
      conversationId: newId('conv'),
      callId,
      voiceSessionId: null,
      kind: 'combined',
      blobSha256: sha256,
      mimeType: 'audio/ogg',
      channels: 2,
      durationMs: 1000,
      bytes: bytes.length,
    });
    const url = signLink(t.services.box, 'https://concierge.example', { sha256, mime: 'audio/ogg', name: `${callId}-combined.ogg` });
    return { readable: () => fetchLink(url) };
  },
  'voice spool chunk': async (_ws, bytes) => {
    const sha256 = await commit(bytes);
    const sessionId = newId('vs');
    await em().insert(VoiceRecordingChunk, { sessionId, track: 'caller', seq: 0, startSample: 0, blobSha256: sha256 });
    return { readable: () => stored(sha256), remove: () => t.services.voice.releaseSpool(testBlobs, sessionId) };
  },
};

const kinds = Object.keys(OWNERS) as OwnerKind[];
const deletable: OwnerKind[] = ['kb file', 'voice note', 'voice spool chunk'];

describe('blob garbage collection counts every owner of the same bytes', () => {
  test.each(deletable)('deleting a %s whose bytes nothing else holds removes them (the collector does collect)', async (a) => {
    const owner = await OWNERS[a](wsA, wav());
    expect(await owner.readable()).toBe(200);
    await owner.remove!();
    expect(await owner.readable()).toBe(410);
  });

  const pairs = deletable.flatMap((a) => kinds.map((b) => [a, b] as const));
  test.each(pairs)("deleting workspace A's %s keeps workspace B's %s of the same bytes readable", async (a, b) => {
    const bytes = wav();
    const ownerA = await OWNERS[a](wsA, bytes);
    const ownerB = await OWNERS[b](wsB, bytes);
    expect(await ownerB.readable()).toBe(200);
    await ownerA.remove!();
    expect(await ownerB.readable()).toBe(200);
  });
});

describe('two voice spools saving and releasing the same chunk at once (silence is the same bytes in every call)', () => {
  test("a spool releasing its chunk while another commits the same bytes and has not recorded its row yet leaves the other's chunk readable", async () => {
    const pcm = Buffer.alloc(16_000); // a second of silence at 8 kHz, as every call's quiet stretches
    const sha256 = createHash('sha256').update(pcm).digest('hex');
    // Session A's chunk is stored; session B's commit of the same bytes is held after the bytes are written, before its row.
    await new PgRecordingSpool(db.orm.em, testBlobs, newId('vs')).saveChunk('agent', 0, 0, pcm);
    const sessionA = (await em().findOneOrFail(VoiceRecordingChunk, { blobSha256: sha256 })).sessionId;
    let committed!: () => void;
    const bytesWritten = new Promise<void>((r) => (committed = r));
    let go!: () => void;
    const gate = new Promise<void>((r) => (go = r));
    const heldStore: BlobStore = Object.assign(Object.create(testBlobs) as BlobStore, {
      commit: async (staged: StagedBlob) => {
        const sha = await testBlobs.commit(staged);
        committed();
        await gate;
        return sha;
      },
    });
    const sessionB = newId('vs');
    const saving = new PgRecordingSpool(db.orm.em, heldStore, sessionB).saveChunk('agent', 0, 0, pcm);
    await bytesWritten;
    // A's release runs now: without the blob's lock it found no other row and deleted the bytes B's row is about to name.
    const releasing = t.services.voice.releaseSpool(testBlobs, sessionA);
    await new Promise((r) => setTimeout(r, 300));
    go();
    await Promise.all([saving, releasing]);
    const chunks: Buffer[] = [];
    for await (const c of new PgRecordingSpool(db.orm.em, testBlobs, sessionB).chunks('agent')) chunks.push(c.pcm);
    expect(Buffer.concat(chunks).equals(pcm)).toBe(true);
  });
});
