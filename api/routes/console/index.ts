import type { FastifyPluginAsync } from 'fastify';
import type { Services } from '../../../app/services';
import type { ConsoleLimits } from '../../../lib/ratelimit';
import { consoleAgentRoutes } from './agents';
import { consoleAnalyticsRoutes } from './analytics';
import { consoleAuditRoutes } from './audit';
import { consoleDebuggerRoutes } from './debugger';
import { consoleKeyRoutes } from './keys';
import { consoleSessionRoutes } from './session';
import { consoleSiteRoutes } from './sites';
import { consoleSsoRoutes } from './sso';
import { consoleTotpRoutes } from './totp';
import { consoleUserRoutes } from './users';

/** The console's own operations, under /api/console/ (shared/spec/DECISIONS.md "The console"). */
export const consoleRoutes: FastifyPluginAsync<{ services: Services; limits: ConsoleLimits }> = async (app, opts) => {
  await app.register(consoleSessionRoutes, opts);
  await app.register(consoleUserRoutes, { services: opts.services });
  await app.register(consoleKeyRoutes, { services: opts.services });
  await app.register(consoleAuditRoutes, { services: opts.services });
  await app.register(consoleSiteRoutes, { services: opts.services });
  await app.register(consoleSsoRoutes, opts);
  await app.register(consoleTotpRoutes, { services: opts.services });
  await app.register(consoleAgentRoutes, { services: opts.services });
  await app.register(consoleDebuggerRoutes, { services: opts.services });
  await app.register(consoleAnalyticsRoutes, { services: opts.services });
};
