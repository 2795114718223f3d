import { useInfiniteQuery, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, ApiError, call, currentCsrfToken, type Body, type RequestBody } from '../../lib/api';

export type KbFile = Body<'/api/v1/kb/files', 'get'>['files'][number];
export type Folder = Body<'/api/v1/kb/folders', 'get'>['folders'][number];
export type SearchRequest = RequestBody<'/api/v1/kb/search', 'post'>;
export type SearchMatch = Body<'/api/v1/kb/search', 'post'>['matches'][number];

const kb = ['v1', 'kb'] as const;
const filesKey = (folderId: string | null) => [...kb, 'files', folderId ?? 'root'] as const;
const foldersKey = [...kb, 'folders'] as const;

/** Indexing is still under way: the list is asked again until every file is active or in error. */
const indexing = (files: KbFile[] | undefined) => (files ?? []).some((f) => f.status === 'pending' || f.status === 'processing');
/** How often a list with a file still indexing is asked again (the API has no push channel for files). */
export const INDEXING_POLL_MS = 1000;

/** Files a page: the next ones come with "Show more files" (the API's cursor). */
const FILES_PAGE = 100;

/** The current versions of the files in one folder (null: the root), newest first, a page at a time; asked again while any is indexing. */
export function useFiles(folderId: string | null) {
  return useInfiniteQuery({
    queryKey: filesKey(folderId),
    queryFn: ({ pageParam }) =>
      call(api.GET('/api/v1/kb/files', { params: { query: { limit: FILES_PAGE, ...(folderId ? { folder_id: folderId } : {}), ...(pageParam ? { cursor: pageParam } : {}) } } })),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (last) => last.next_cursor ?? undefined,
    refetchInterval: (query) => (indexing(query.state.data?.pages.flatMap((p) => p.files)) ? INDEXING_POLL_MS : false),
  });
}

/**
 * Every folder of the workspace, each with its path: the API lists one level at a time (GET /api/v1/kb/folders?parent_id),
 * so the tree is read level by level. A workspace's folders are a handful; sorted by path.
 */
export function useFolderTree() {
  return useQuery({
    queryKey: foldersKey,
    queryFn: async () => {
      const all: Folder[] = [];
      let level: Array<string | undefined> = [undefined];
      while (level.length) {
        const found = await Promise.all(level.map((parent) => call(api.GET('/api/v1/kb/folders', { params: { query: parent ? { parent_id: parent } : {} } }))));
        const folders = found.flatMap((f) => f.folders);
        all.push(...folders);
        level = folders.map((f) => f.id);
      }
      return all.sort((a, b) => a.path.localeCompare(b.path));
    },
  });
}

function useKbMutation<A, R>(fn: (args: A) => Promise<R>) {
  const client = useQueryClient();
  return useMutation({ mutationFn: fn, onSettled: () => client.invalidateQueries({ queryKey: kb }) });
}

export const useCreateFolder = () => useKbMutation((body: RequestBody<'/api/v1/kb/folders', 'post'>) => call(api.POST('/api/v1/kb/folders', { body })));
export const useRenameFolder = () => useKbMutation(({ id, name }: { id: string; name: string }) => call(api.PATCH('/api/v1/kb/folders/{id}', { params: { path: { id } }, body: { name } })));
export const useDeleteFolder = () => useKbMutation((id: string) => call(api.DELETE('/api/v1/kb/folders/{id}', { params: { path: { id } } })));
export const useMoveFile = () => useKbMutation(({ id, folderId }: { id: string; folderId: string | null }) => call(api.POST('/api/v1/kb/files/{id}/move', { params: { path: { id } }, body: { folder_id: folderId } })));
export const useDeleteFile = () => useKbMutation((id: string) => call(api.DELETE('/api/v1/kb/files/{id}', { params: { path: { id } } })));

export function useSearch() {
  return useMutation({ mutationFn: (body: SearchRequest) => call(api.POST('/api/v1/kb/search', { body })) });
}

export interface UploadRequest {
  file: File;
  folderId: string | null;
  /** The display name; a name already in the folder makes this upload that document's next version. */
  name?: string;
  onProgress: (sent: number, total: number) => void;
}

/**
 * POST /api/v1/kb/files over XMLHttpRequest, whose upload reports progress (fetch has no upload progress): the session's
 * cookie and CSRF token as every unsafe request of the console; an answer outside 2xx as the client's ApiError.
 */
export function uploadFile(req: UploadRequest): Promise<KbFile> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', '/api/v1/kb/files');
    const token = currentCsrfToken();
    if (token) xhr.setRequestHeader('X-CSRF-Token', token);
    xhr.responseType = 'json';
    xhr.upload.onprogress = (event) => {
      if (event.lengthComputable) req.onProgress(event.loaded, event.total);
    };
    xhr.onload = () => {
      const body = (xhr.response ?? {}) as Record<string, unknown>;
      if (xhr.status >= 200 && xhr.status < 300) return resolve(body as unknown as KbFile);
      reject(
        new ApiError(
          xhr.status,
          typeof body.error === 'string' ? body.error : 'http_error',
          typeof body.message === 'string' ? body.message : `The service answered ${xhr.status}.`,
          null,
          body,
        ),
      );
    };
    xhr.onerror = () => reject(new ApiError(0, 'network_error', 'The service cannot be reached. Check the connection and try again.'));
    const form = new FormData();
    // The fields before the file: the API reads them as the body streams in.
    if (req.folderId) form.append('folder_id', req.folderId);
    if (req.name) form.append('name', req.name);
    form.append('file', req.file, req.file.name);
    xhr.send(form);
  });
}

/** An upload as a mutation: the file lists are asked again when it lands (and then, while it indexes, every second). */
export function useUpload() {
  const client = useQueryClient();
  return useMutation({ mutationFn: uploadFile, onSettled: () => client.invalidateQueries({ queryKey: kb }) });
}
