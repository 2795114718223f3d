import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, call, type Body, type RequestBody } from '../../lib/api';

export type McpServer = Body<'/api/v1/mcp-servers', 'get'>['mcp_servers'][number];
export type NewMcpServer = RequestBody<'/api/v1/mcp-servers', 'post'>;

const all = ['v1', 'mcp-servers'] as const;

export function useMcpServers() {
  return useQuery({ queryKey: all, queryFn: () => call(api.GET('/api/v1/mcp-servers', { params: { query: { limit: 100 } } })) });
}

/** The workspace's `mcp` credentials, to attach one as a server's bearer token. */
export function useMcpCredentials(enabled: boolean) {
  return useQuery({
    queryKey: ['v1', 'credentials', { provider: 'mcp' }],
    queryFn: () => call(api.GET('/api/v1/credentials', { params: { query: { provider: 'mcp', limit: 200 } } })),
    enabled,
  });
}

function useMcpMutation<A, R>(fn: (args: A) => Promise<R>) {
  const client = useQueryClient();
  return useMutation({ mutationFn: fn, onSettled: () => client.invalidateQueries({ queryKey: all }) });
}

export const useRegisterMcpServer = () => useMcpMutation((body: NewMcpServer) => call(api.POST('/api/v1/mcp-servers', { body })));
/** Any change makes the API connect again and list the tools anew. */
export const useUpdateMcpServer = () =>
  useMcpMutation(({ id, ...body }: { id: string } & RequestBody<'/api/v1/mcp-servers/{id}', 'patch'>) => call(api.PATCH('/api/v1/mcp-servers/{id}', { params: { path: { id } }, body })));
