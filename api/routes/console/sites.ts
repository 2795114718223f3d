import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import type { Services } from '../../../app/services';
import type { SiteView } from '../../../domain/widget/sites';
import { ErrorBody } from '../../schemas/common';
import { sessionErrors } from '../../schemas/console';
import { ConsoleSite, ConsoleSiteList, CreatedSite, CreateSiteBody, RotatedSiteSecret, RotateSiteSecretBody, SiteId, UpdateSiteBody } from '../../schemas/console-sites';
import { auditOf, userOf } from '../../types';

const tags = ['Console: sites'];
const forbidden = ErrorBody.meta({ description: "forbidden: only an owner or admin manages sites; csrf_failed: without the session's X-CSRF-Token or from another origin" });
const notFound = ErrorBody.meta({ description: 'not_found: no such site in this workspace' });
const invalid = ErrorBody.meta({ description: 'invalid_request: a field failed validation, or an origin is not a bare origin such as https://shop.example, or the launcher label is not one line of at most 40 characters (the message names the field)' });

/**
 * Web-chat sites in the console (docs/widget.md, "Sites"): the workspace's sites, create (the secret once), origins,
 * page commands and look, secret rotation with a grace period (audited), suspend and resume. Every operation is
 * scoped to the session's workspace inside SiteService: another workspace's site is 404, as an unknown id.
 */
export const consoleSiteRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'sites' | 'publicBaseUrl'> }> = async (app, opts) => {
  const { sites } = opts.services;
  /** The embed code docs/widget.md gives ("The prebuilt widget"), from this service's public address (read when a handler runs). */
  const withSnippet = (site: SiteView) => ({ ...site, snippet: `<script src="${new URL('/widget.js', opts.services.publicBaseUrl).href}" data-site-id="${site.id}"></script>` });

  app.get('/api/console/sites', {
    config: { console: 'session', permission: 'manageSites' },
    schema: { operationId: 'consoleListSites', summary: "The workspace's web-chat sites: agent, status, origins, page commands, look, a previous secret's grace; never a secret", tags, response: { 200: ConsoleSiteList, ...sessionErrors, 403: forbidden } },
    handler: async (request) => ({ sites: (await sites.list(userOf(request).workspaceId)).map(withSnippet) }),
  });

  app.post('/api/console/sites', {
    config: { console: 'session', permission: 'manageSites' },
    schema: {
      operationId: 'consoleCreateSite',
      summary: 'Create a site for one of the workspace\'s agents: its secret is in this answer, once',
      tags,
      body: CreateSiteBody,
      response: { 201: CreatedSite, 400: invalid, ...sessionErrors, 403: forbidden, 404: ErrorBody.meta({ description: 'not_found: no such agent in this workspace' }) },
    },
    handler: async (request, reply) => {
      const workspaceId = userOf(request).workspaceId;
      const made = await sites.create(workspaceId, request.body.agent_id, request.body.origins);
      return reply.code(201).send({ ...withSnippet(await sites.get(workspaceId, made.site_id)), site_secret: made.site_secret });
    },
  });

  app.get('/api/console/sites/:id', {
    config: { console: 'session', permission: 'manageSites' },
    schema: { operationId: 'consoleGetSite', summary: 'A site of the workspace (never its secret)', tags, params: SiteId, response: { 200: ConsoleSite, ...sessionErrors, 403: forbidden, 404: notFound } },
    handler: async (request) => withSnippet(await sites.get(userOf(request).workspaceId, request.params.id)),
  });

  app.patch('/api/console/sites/:id', {
    config: { console: 'session', permission: 'manageSites' },
    schema: {
      operationId: 'consoleUpdateSite',
      summary: 'Change origins, page commands and look: the fields given replace their values, all checked before any is written; sockets from a removed origin close',
      tags,
      params: SiteId,
      body: UpdateSiteBody,
      response: { 200: ConsoleSite, 400: invalid, ...sessionErrors, 403: forbidden, 404: notFound },
    },
    handler: async (request) => {
      const workspaceId = userOf(request).workspaceId;
      await sites.update(request.params.id, request.body, { workspaceId });
      return withSnippet(await sites.get(workspaceId, request.params.id));
    },
  });

  app.post('/api/console/sites/:id/rotate-secret', {
    config: { console: 'session', permission: 'manageSites' },
    schema: {
      operationId: 'consoleRotateSiteSecret',
      summary: 'A new site secret, shown once; the previous one still verifies user_hash for grace_hours (audited as site.secret_rotated)',
      tags,
      params: SiteId,
      body: RotateSiteSecretBody,
      response: { 200: RotatedSiteSecret, 400: invalid, ...sessionErrors, 403: forbidden, 404: notFound },
    },
    handler: async (request) => sites.rotateSecret(request.params.id, request.body.grace_hours, auditOf(request), { workspaceId: userOf(request).workspaceId }),
  });

  for (const [action, status] of [
    ['suspend', 'suspended'],
    ['resume', 'active'],
  ] as const) {
    app.post(`/api/console/sites/:id/${action}`, {
      config: { console: 'session', permission: 'manageSites' },
      schema: {
        operationId: action === 'suspend' ? 'consoleSuspendSite' : 'consoleResumeSite',
        summary:
          action === 'suspend'
            ? "Suspend the site: every widget request is 403 site_suspended and the site's open sockets close at once"
            : 'Resume a suspended site: the widget works again',
        tags,
        params: SiteId,
        response: { 200: ConsoleSite, ...sessionErrors, 403: forbidden, 404: notFound },
      },
      handler: async (request) => {
        const workspaceId = userOf(request).workspaceId;
        await sites.setStatus(request.params.id, status, { workspaceId });
        return withSnippet(await sites.get(workspaceId, request.params.id));
      },
    });
  }
};
