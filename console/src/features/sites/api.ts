import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, call, type Body, type RequestBody } from '../../lib/api';

export type Site = Body<'/api/console/sites', 'get'>['sites'][number];
export type Appearance = Site['appearance'];
export type SiteChange = RequestBody<'/api/console/sites/{id}', 'patch'>;
export type Agent = Body<'/api/v1/agents/{id}', 'get'>;
export type AgentTriggers = NonNullable<Agent['spec']['triggers']>;

const all = ['console', 'sites'] as const;
const one = (id: string) => [...all, id] as const;
const agentsKey = ['v1', 'agents'] as const;

export function useSites() {
  return useQuery({ queryKey: all, queryFn: () => call(api.GET('/api/console/sites')) });
}

export function useSite(id: string) {
  return useQuery({ queryKey: one(id), queryFn: () => call(api.GET('/api/console/sites/{id}', { params: { path: { id } } })) });
}

/** The workspace's agents, for the site's agent picker (the first 200, newest first: a workspace has a handful). */
export function useAgents() {
  return useQuery({ queryKey: agentsKey, queryFn: () => call(api.GET('/api/v1/agents', { params: { query: { limit: 200 } } })) });
}

/** The site's agent, whose web-chat trigger holds the identity-verification setting and the greeting. */
export function useAgent(id: string) {
  return useQuery({ queryKey: [...agentsKey, id], queryFn: () => call(api.GET('/api/v1/agents/{id}', { params: { path: { id } } })) });
}

function useSiteMutation<A, R>(fn: (args: A) => Promise<R>) {
  const client = useQueryClient();
  return useMutation({ mutationFn: fn, onSettled: () => client.invalidateQueries({ queryKey: all }) });
}

export const useCreateSite = () => useSiteMutation((body: RequestBody<'/api/console/sites', 'post'>) => call(api.POST('/api/console/sites', { body })));
export const useUpdateSite = (id: string) => useSiteMutation((body: SiteChange) => call(api.PATCH('/api/console/sites/{id}', { params: { path: { id } }, body })));
export const useRotateSiteSecret = (id: string) =>
  useSiteMutation((graceHours: number) => call(api.POST('/api/console/sites/{id}/rotate-secret', { params: { path: { id } }, body: { grace_hours: graceHours } })));
export const useSetSiteStatus = (id: string) =>
  useSiteMutation((action: 'suspend' | 'resume') =>
    call(action === 'suspend' ? api.POST('/api/console/sites/{id}/suspend', { params: { path: { id } } }) : api.POST('/api/console/sites/{id}/resume', { params: { path: { id } } })),
  );

/** A change of the agent's web-chat trigger (PATCH replaces the top-level `triggers`, so the others go along unchanged). */
export function useUpdateWebChat(agent: Agent) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (change: Partial<NonNullable<AgentTriggers['web_chat']>>) => {
      const triggers = agent.spec.triggers ?? {};
      const body = { triggers: { ...triggers, web_chat: { ...triggers.web_chat!, ...change } } } as RequestBody<'/api/v1/agents/{id}', 'patch'>;
      return call(api.PATCH('/api/v1/agents/{id}', { params: { path: { id: agent.id } }, body }));
    },
    onSettled: () => client.invalidateQueries({ queryKey: agentsKey }),
  });
}

/** The page commands the widget knows the arguments of (domain/chat/page-commands.ts); any other lower-snake-case name takes flat data. */
export const KNOWN_COMMANDS = ['navigate', 'open_url', 'highlight', 'open_checkout'] as const;

export const POSITIONS: Record<Appearance['position'], string> = { right: 'Bottom right', left: 'Bottom left' };
export const THEMES: Record<Appearance['theme'], string> = { auto: "The visitor's colour scheme", light: 'Light', dark: 'Dark' };
export const LANGUAGES: Record<Appearance['language'], string> = {
  auto: "The visitor's browser language",
  en: 'English',
  es: 'Spanish',
  fr: 'French',
  de: 'German',
  pt: 'Portuguese',
  ar: 'Arabic',
};

/** `#abc` or `#aabbcc` as `#aabbcc`, lower case; null for anything else (the API's own rule). */
export function hexColour(value: string): string | null {
  const m = /^#?([0-9a-f]{3}|[0-9a-f]{6})$/i.exec(value.trim());
  if (!m) return null;
  const hex = m[1].toLowerCase();
  return `#${hex.length === 3 ? [...hex].map((c) => c + c).join('') : hex}`;
}

const rgb = (hex: string) => [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
function luminance(c: number[]): number {
  const [r, g, b] = c.map((x) => {
    const v = x / 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}
function contrast(a: number[], b: number[]): number {
  const [x, y] = [luminance(a), luminance(b)];
  return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05);
}

/**
 * The text colour the widget puts on the brand colour: white or near-black, whichever reads better (web/widget.js,
 * applyLook), with its contrast ratio.
 */
export function textOn(brand: string): { colour: '#ffffff' | '#111111'; name: string; ratio: number } {
  const c = rgb(brand);
  const white = contrast(c, [255, 255, 255]);
  const dark = contrast(c, [17, 17, 17]);
  return white >= dark ? { colour: '#ffffff', name: 'white', ratio: white } : { colour: '#111111', name: 'near-black', ratio: dark };
}

/** Origins as typed: one per line, or separated by commas or spaces. */
export const originsOf = (text: string) => text.split(/[\s,]+/).filter(Boolean);
