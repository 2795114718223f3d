import { useEffect, useRef, useState, type DragEvent, type FormEvent } from 'react';
import './kb.css';
import { DataTable } from '../../components/DataTable';
import { ConfirmDialog, Dialog } from '../../components/Dialog';
import { ErrorAlert, Loading, useAnnounce } from '../../components/feedback';
import { Field } from '../../components/Field';
import { NotAllowed, Page } from '../../components/Page';
import { describeError } from '../../lib/api';
import { when } from '../../lib/format';
import { hasScope, type Session } from '../auth/api';
import {
  useCreateFolder,
  useDeleteFile,
  useDeleteFolder,
  useFiles,
  useFolderTree,
  useMoveFile,
  useRenameFolder,
  useSearch,
  useUpload,
  type Folder,
  type KbFile,
} from './api';

const STATUS: Record<KbFile['status'], string> = { pending: 'Pending', processing: 'Indexing', active: 'Active', error: 'Error' };

/** The knowledge base: folders, files with their indexing status, uploads with progress, and a search playground. */
export function KnowledgeBasePage({ session }: { session: Session }) {
  if (!hasScope(session, 'kb:read')) return <NotAllowed title="Knowledge base" why="Your role does not read the knowledge base." />;
  return <KnowledgeBase canWrite={hasScope(session, 'kb:write')} />;
}

function KnowledgeBase({ canWrite }: { canWrite: boolean }) {
  const tree = useFolderTree();
  const [folderId, setFolderId] = useState<string | null>(null);
  const folders = tree.data ?? [];
  const folder = folders.find((f) => f.id === folderId) ?? null;
  const [dialog, setDialog] = useState<'new' | 'rename' | 'delete' | null>(null);
  return (
    <Page title="Knowledge base">
      <p className="lead">What your agents answer from. Uploads are indexed in the background; search shows what an agent would be given.</p>
      <section className="section" aria-labelledby="kb-files">
        <h2 id="kb-files">Files</h2>
        <div className="filters">
          <div className="field">
            <label htmlFor="kb-folder">Folder</label>
            <select id="kb-folder" className="select" value={folderId ?? ''} onChange={(e) => setFolderId(e.target.value || null)}>
              <option value="">Top level</option>
              {folders.map((f) => (
                <option key={f.id} value={f.id}>
                  {f.path}
                </option>
              ))}
            </select>
          </div>
          {canWrite ? (
            <>
              <button type="button" className="button small" onClick={() => setDialog('new')}>
                New folder
              </button>
              {folder ? (
                <>
                  <button type="button" className="button small" onClick={() => setDialog('rename')}>
                    Rename folder
                  </button>
                  <button type="button" className="button small danger" onClick={() => setDialog('delete')}>
                    Delete folder
                  </button>
                </>
              ) : null}
            </>
          ) : null}
        </div>
        {tree.isError ? <ErrorAlert error={tree.error} /> : null}
        {canWrite ? <Uploader folder={folder} /> : null}
        <Files folderId={folderId} folders={folders} canWrite={canWrite} />
      </section>
      <SearchPlayground folders={folders} />
      {dialog === 'new' ? <NewFolderDialog parent={folder} onClose={() => setDialog(null)} onMade={(f) => setFolderId(f.id)} /> : null}
      {dialog === 'rename' && folder ? <RenameFolderDialog folder={folder} onClose={() => setDialog(null)} /> : null}
      {dialog === 'delete' && folder ? <DeleteFolderDialog folder={folder} onClose={() => setDialog(null)} onDeleted={() => setFolderId(folder.parent_id)} /> : null}
    </Page>
  );
}

interface PendingUpload {
  key: string;
  file: File;
  folderId: string | null;
  /** Set for a new version of a document: its name (the same name in the same folder makes the next version). */
  name?: string;
}

let uploadKeys = 0;

/**
 * Drop files here, or choose them with the file input (a keyboard's way in): each is uploaded at once, with its progress,
 * into the folder shown.
 */
function Uploader({ folder }: { folder: Folder | null }) {
  const [uploads, setUploads] = useState<PendingUpload[]>([]);
  const [over, setOver] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  const add = (files: FileList | File[]) => setUploads((u) => [...u, ...[...files].map((file) => ({ key: String(++uploadKeys), file, folderId: folder?.id ?? null }))]);
  const drop = (event: DragEvent) => {
    event.preventDefault();
    setOver(false);
    if (event.dataTransfer.files.length) add(event.dataTransfer.files);
  };
  return (
    <div className="stack-tight">
      <div
        className={over ? 'dropzone over' : 'dropzone'}
        role="group"
        aria-label="Upload files"
        onDragOver={(e) => {
          e.preventDefault();
          setOver(true);
        }}
        onDragLeave={() => setOver(false)}
        onDrop={drop}
      >
        <p>
          Drop files here to upload them to <strong>{folder ? folder.path : 'the top level'}</strong>, or
        </p>
        <button type="button" className="button" onClick={() => input.current?.click()}>
          Choose files to upload
        </button>
        <input
          ref={input}
          hidden
          type="file"
          multiple
          onChange={(e) => {
            if (e.target.files?.length) add(e.target.files);
            e.target.value = '';
          }}
        />
        <p className="hint">PDF, office documents, text, email, images, audio and video, up to 200 MB each.</p>
      </div>
      <UploadList uploads={uploads} onDone={(key) => setUploads((u) => u.filter((x) => x.key !== key))} />
    </div>
  );
}

function UploadList({ uploads, onDone }: { uploads: PendingUpload[]; onDone: (key: string) => void }) {
  if (!uploads.length) return null;
  return (
    <ul className="uploads" aria-label="Uploads">
      {uploads.map((u) => (
        <UploadRow key={u.key} upload={u} onDone={() => onDone(u.key)} />
      ))}
    </ul>
  );
}

/** One upload, started when it appears: its progress, then it leaves the list for the files table (or says why it failed). */
function UploadRow({ upload, onDone }: { upload: PendingUpload; onDone: () => void }) {
  const send = useUpload();
  const announce = useAnnounce();
  const [sent, setSent] = useState({ loaded: 0, total: upload.file.size });
  const started = useRef(false);
  useEffect(() => {
    if (started.current) return;
    started.current = true;
    send.mutate(
      { file: upload.file, folderId: upload.folderId, name: upload.name, onProgress: (loaded, total) => setSent({ loaded, total }) },
      {
        onSuccess: (file) => {
          announce(`${file.name} uploaded${file.version > 1 ? ` as version ${file.version}` : ''}: indexing.`);
          onDone();
        },
        onError: (err) => announce(`${upload.file.name} was not uploaded: ${describeError(err)}`),
      },
    );
  }, [send, upload, announce, onDone]);
  const percent = sent.total ? Math.round((sent.loaded / sent.total) * 100) : 0;
  return (
    <li className="upload">
      <span>
        {send.isError ? `${upload.file.name}: not uploaded` : `Uploading ${upload.file.name}: ${percent}%`}
      </span>
      <progress max={100} value={percent} aria-label={`Upload of ${upload.file.name}`} />
      {send.isError ? (
        <div className="row">
          <ErrorAlert error={send.error} />
          <button type="button" className="button small" onClick={onDone}>
            Dismiss
          </button>
        </div>
      ) : null}
    </li>
  );
}

function Files({ folderId, folders, canWrite }: { folderId: string | null; folders: Folder[]; canWrite: boolean }) {
  const files = useFiles(folderId);
  const [moving, setMoving] = useState<KbFile | null>(null);
  const [deleting, setDeleting] = useState<KbFile | null>(null);
  const [versions, setVersions] = useState<PendingUpload[]>([]);
  const newVersion = (file: KbFile, chosen: File) => setVersions((v) => [...v, { key: String(++uploadKeys), file: chosen, folderId: file.folder_id, name: file.name }]);
  const rows = files.data?.pages.flatMap((p) => p.files);
  useStatusAnnouncements(rows);
  if (files.isPending) return <Loading what="files" />;
  if (files.isError || !rows) return <ErrorAlert error={files.error} />;
  return (
    <>
      <UploadList uploads={versions} onDone={(key) => setVersions((v) => v.filter((x) => x.key !== key))} />
      {rows.length === 0 ? (
        <p className="empty">No files in this folder.</p>
      ) : (
        <DataTable
          label="Files"
          rows={rows}
          rowKey={(f) => f.id}
          columns={[
            { header: 'Name', rowHeader: true, className: 'wrap-anywhere', cell: (f) => f.name },
            { header: 'Status', cell: (f) => <FileStatus file={f} /> },
            { header: 'Version', cell: (f) => f.version },
            { header: 'Passages', cell: (f) => f.chunk_count },
            { header: 'Size', cell: (f) => size(f.file_size) },
            { header: 'Updated', cell: (f) => when(f.updated_at) },
            ...(canWrite
              ? [
                  {
                    header: 'Actions',
                    hideHeader: true,
                    cell: (f: KbFile) => (
                      <div className="row-actions">
                        <VersionButton file={f} onChosen={(chosen) => newVersion(f, chosen)} />
                        <button type="button" className="button small" onClick={() => setMoving(f)} aria-label={`Move ${f.name}`}>
                          Move
                        </button>
                        <button type="button" className="button small danger" onClick={() => setDeleting(f)} aria-label={`Delete ${f.name}`}>
                          Delete
                        </button>
                      </div>
                    ),
                  },
                ]
              : []),
          ]}
        />
      )}
      {files.hasNextPage ? (
        <div className="pager">
          <button type="button" className="button" disabled={files.isFetchingNextPage} onClick={() => void files.fetchNextPage()}>
            Show more files
          </button>
        </div>
      ) : null}
      {moving ? <MoveDialog file={moving} folders={folders} onClose={() => setMoving(null)} /> : null}
      {deleting ? <DeleteFileDialog file={deleting} onClose={() => setDeleting(null)} /> : null}
    </>
  );
}

/** A status change of a listed file (indexed, failed) said in the polite live region. */
function useStatusAnnouncements(files: KbFile[] | undefined) {
  const announce = useAnnounce();
  const seen = useRef(new Map<string, KbFile['status']>());
  useEffect(() => {
    for (const f of files ?? []) {
      const before = seen.current.get(f.id);
      if (before && before !== f.status && (f.status === 'active' || f.status === 'error')) {
        announce(f.status === 'active' ? `${f.name} is indexed and searchable.` : `${f.name} could not be indexed: ${f.error_message ?? 'no reason given'}.`);
      }
      seen.current.set(f.id, f.status);
    }
  }, [files, announce]);
}

function FileStatus({ file: f }: { file: KbFile }) {
  if (f.status === 'error') return <span className="tag danger-tag">Error: {f.error_message ?? 'no reason given'}</span>;
  return <span className={f.status === 'active' ? 'tag' : 'tag pending-tag'}>{STATUS[f.status]}</span>;
}

/** "New version": the same name into the same folder (the API makes it the document's next version, and current). */
function VersionButton({ file, onChosen }: { file: KbFile; onChosen: (chosen: File) => void }) {
  const input = useRef<HTMLInputElement>(null);
  return (
    <>
      <button type="button" className="button small" onClick={() => input.current?.click()} aria-label={`Upload a new version of ${file.name}`}>
        New version
      </button>
      <input
        ref={input}
        hidden
        type="file"
        onChange={(e) => {
          const chosen = e.target.files?.[0];
          if (chosen) onChosen(chosen);
          e.target.value = '';
        }}
      />
    </>
  );
}

function MoveDialog({ file, folders, onClose }: { file: KbFile; folders: Folder[]; onClose: () => void }) {
  const move = useMoveFile();
  const announce = useAnnounce();
  const [target, setTarget] = useState(file.folder_id ?? '');
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const to = folders.find((f) => f.id === target);
    move.mutate({ id: file.id, folderId: target || null }, { onSuccess: () => (announce(`${file.name} moved to ${to ? to.path : 'the top level'}.`), onClose()) });
  };
  return (
    <Dialog title={`Move ${file.name}`} onClose={onClose}>
      <form className="stack" onSubmit={submit}>
        <div className="field">
          <label htmlFor="kb-move-to">Move to</label>
          <select id="kb-move-to" className="select" value={target} onChange={(e) => setTarget(e.target.value)}>
            <option value="">Top level</option>
            {folders.map((f) => (
              <option key={f.id} value={f.id}>
                {f.path}
              </option>
            ))}
          </select>
          <p className="hint">Every version moves with it.</p>
        </div>
        <ErrorAlert error={move.error} />
        <div className="dialog-actions">
          <button type="button" className="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className="button primary" disabled={move.isPending}>
            Move file
          </button>
        </div>
      </form>
    </Dialog>
  );
}

function DeleteFileDialog({ file, onClose }: { file: KbFile; onClose: () => void }) {
  const remove = useDeleteFile();
  const announce = useAnnounce();
  return (
    <ConfirmDialog
      title={`Delete ${file.name}?`}
      body={<p>{file.version > 1 ? `This deletes version ${file.version}; version ${file.version - 1} becomes current again.` : 'The file and its passages are deleted; agents no longer answer from it.'}</p>}
      confirm="Delete file"
      danger
      busy={remove.isPending}
      error={remove.error}
      onConfirm={() => remove.mutate(file.id, { onSuccess: () => (announce(`${file.name} deleted.`), onClose()) })}
      onClose={onClose}
    />
  );
}

function NewFolderDialog({ parent, onClose, onMade }: { parent: Folder | null; onClose: () => void; onMade: (f: Folder) => void }) {
  const create = useCreateFolder();
  const announce = useAnnounce();
  const [name, setName] = useState('');
  const submit = (event: FormEvent) => {
    event.preventDefault();
    create.mutate({ name: name.trim(), ...(parent ? { parent_id: parent.id } : {}) }, { onSuccess: (f) => (announce(`Folder ${f.path} created.`), onMade(f), onClose()) });
  };
  return (
    <Dialog title="New folder" onClose={onClose}>
      <form className="stack" onSubmit={submit}>
        <Field label="Folder name" required maxLength={200} value={name} onChange={(e) => setName(e.target.value)} hint={`Inside ${parent ? parent.path : 'the top level'}.`} />
        <ErrorAlert error={create.error} />
        <div className="dialog-actions">
          <button type="button" className="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className="button primary" disabled={create.isPending}>
            Create folder
          </button>
        </div>
      </form>
    </Dialog>
  );
}

function RenameFolderDialog({ folder, onClose }: { folder: Folder; onClose: () => void }) {
  const rename = useRenameFolder();
  const announce = useAnnounce();
  const [name, setName] = useState(folder.name);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    rename.mutate({ id: folder.id, name: name.trim() }, { onSuccess: (f) => (announce(`Folder renamed to ${f.name}.`), onClose()) });
  };
  return (
    <Dialog title={`Rename ${folder.path}`} onClose={onClose}>
      <form className="stack" onSubmit={submit}>
        <Field label="New name" required maxLength={200} value={name} onChange={(e) => setName(e.target.value)} hint="Files stay; agents selecting the folder keep working." />
        <ErrorAlert error={rename.error} />
        <div className="dialog-actions">
          <button type="button" className="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className="button primary" disabled={rename.isPending}>
            Rename folder
          </button>
        </div>
      </form>
    </Dialog>
  );
}

function DeleteFolderDialog({ folder, onClose, onDeleted }: { folder: Folder; onClose: () => void; onDeleted: () => void }) {
  const remove = useDeleteFolder();
  const announce = useAnnounce();
  return (
    <ConfirmDialog
      title={`Delete ${folder.path}?`}
      body={<p>Only an empty folder can be deleted: move or delete its files and subfolders first.</p>}
      confirm="Delete folder"
      danger
      busy={remove.isPending}
      error={remove.error}
      onConfirm={() =>
        remove.mutate(folder.id, {
          onSuccess: (r) => {
            const agents = r.affected_agents.map((a) => a.name);
            announce(agents.length ? `Folder deleted. Still selected by: ${agents.join(', ')}.` : 'Folder deleted.');
            onDeleted();
            onClose();
          },
        })
      }
      onClose={onClose}
    />
  );
}

/** A query as an agent would send it: the matches, their scores and passages, optionally within one folder. */
function SearchPlayground({ folders }: { folders: Folder[] }) {
  const search = useSearch();
  const [query, setQuery] = useState('');
  const [folderId, setFolderId] = useState('');
  const submit = (event: FormEvent) => {
    event.preventDefault();
    search.mutate({ query: query.trim(), top_k: 8, ...(folderId ? { folder_id: folderId } : {}) });
  };
  return (
    <section className="section" aria-labelledby="kb-search">
      <h2 id="kb-search">Search playground</h2>
      <form className="filters" onSubmit={submit} role="search" aria-label="Knowledge base">
        <Field label="Query" required value={query} onChange={(e) => setQuery(e.target.value)} />
        <div className="field">
          <label htmlFor="kb-search-folder">In folder</label>
          <select id="kb-search-folder" className="select" value={folderId} onChange={(e) => setFolderId(e.target.value)}>
            <option value="">Everything</option>
            {folders.map((f) => (
              <option key={f.id} value={f.id}>
                {f.path}
              </option>
            ))}
          </select>
        </div>
        <button type="submit" className="button primary" disabled={search.isPending}>
          Search
        </button>
      </form>
      <ErrorAlert error={search.error} />
      <div aria-live="polite">
        {search.data ? (
          search.data.matches.length === 0 ? (
            <p className="empty">No matches.</p>
          ) : (
            <ol className="matches" aria-label="Matches">
              {search.data.matches.map((m) => (
                <li key={m.id} className="card">
                  <p>
                    <strong>{m.name}</strong> <span className="tag">Score {m.score.toFixed(3)}</span>
                  </p>
                  <blockquote className="passage">{m.text}</blockquote>
                </li>
              ))}
            </ol>
          )
        ) : null}
      </div>
    </section>
  );
}

function size(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}
