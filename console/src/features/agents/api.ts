import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, call, type Body, type RequestBody } from '../../lib/api';

export type Agent = Body<'/api/v1/agents/{id}', 'get'>;
export type AgentSpec = Agent['spec'];
export type NewAgent = RequestBody<'/api/v1/agents', 'post'>;
export type AgentPatch = RequestBody<'/api/v1/agents/{id}', 'patch'>;
export type TryTurn = Body<'/api/console/agents/{id}/try', 'post'>;
export type McpServer = Body<'/api/v1/mcp-servers', 'get'>['mcp_servers'][number];
export type Credential = Body<'/api/v1/credentials', 'get'>['credentials'][number];

/** The same key the Sites page uses for agents: a change here shows there too. */
const agentsKey = ['v1', 'agents'] as const;

export function useAgents() {
  return useQuery({ queryKey: agentsKey, queryFn: () => call(api.GET('/api/v1/agents', { params: { query: { limit: 200 } } })) });
}

export function useAgent(id: string) {
  return useQuery({ queryKey: [...agentsKey, id], queryFn: () => call(api.GET('/api/v1/agents/{id}', { params: { path: { id } } })) });
}

function useAgentMutation<A, R>(fn: (args: A) => Promise<R>) {
  const client = useQueryClient();
  return useMutation({ mutationFn: fn, onSettled: () => client.invalidateQueries({ queryKey: agentsKey }) });
}

export const useCreateAgent = () => useAgentMutation((body: NewAgent) => call(api.POST('/api/v1/agents', { body })));
export const useUpdateAgent = (id: string) => useAgentMutation((body: AgentPatch) => call(api.PATCH('/api/v1/agents/{id}', { params: { path: { id } }, body })));
export const usePublishAgent = (id: string) => useAgentMutation(() => call(api.POST('/api/v1/agents/{id}/publish', { params: { path: { id } } })));

/** One real turn in a test conversation (POST /api/console/agents/{id}/try): nothing lists, counts or bills it. */
export function useTryAgent(id: string) {
  return useMutation({ mutationFn: (body: { text: string; conversation_id?: string }) => call(api.POST('/api/console/agents/{id}/try', { params: { path: { id } }, body })) });
}

/** The workspace's MCP servers and their tools, for the agent's MCP actions (when the role reads them). */
export function useMcpServers(enabled: boolean) {
  return useQuery({ queryKey: ['v1', 'mcp-servers'], queryFn: () => call(api.GET('/api/v1/mcp-servers', { params: { query: { limit: 100 } } })), enabled });
}

/** Credentials of one provider, for the model's llm credential and the number's msgapp credential (when the role reads them). */
export function useCredentials(provider: 'llm' | 'msgapp', enabled: boolean) {
  return useQuery({
    queryKey: ['v1', 'credentials', { provider }],
    queryFn: () => call(api.GET('/api/v1/credentials', { params: { query: { provider, limit: 200 } } })),
    enabled,
  });
}

/** Every knowledge-base folder with its path (read level by level, as the Knowledge base page does), for the agent's selection. */
export function useKbFolders(enabled: boolean) {
  return useQuery({
    queryKey: ['v1', 'kb', 'folders'],
    enabled,
    queryFn: async () => {
      const all: Array<Body<'/api/v1/kb/folders', 'get'>['folders'][number]> = [];
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

/** Every current file of the knowledge base (the top level's and each folder's, up to 200 each), labelled by its path, for the agent's file selection. */
export function useKbFiles(folders: Array<{ id: string; path: string }> | undefined, enabled: boolean) {
  return useQuery({
    queryKey: ['v1', 'kb', 'files', 'all', (folders ?? []).map((f) => f.id)],
    enabled: enabled && folders !== undefined,
    queryFn: async () => {
      const places = [{ id: undefined as string | undefined, path: '' }, ...(folders ?? []).map((f) => ({ id: f.id as string | undefined, path: f.path }))];
      const found = await Promise.all(
        places.map(async (place) => {
          const page = await call(api.GET('/api/v1/kb/files', { params: { query: { limit: 200, ...(place.id ? { folder_id: place.id } : {}) } } }));
          return page.files.map((f) => ({ id: f.id, label: `${place.path}/${f.name}` }));
        }),
      );
      return found.flat().sort((a, b) => a.label.localeCompare(b.label));
    },
  });
}
