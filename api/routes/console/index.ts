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
import { named } from '../../plugin-name';

/** The console's own operations, under /api/console/ (shared/spec/DECISIONS.md "The console"). */
export const consoleRoutes: FastifyPluginAsync<{ services: Services; limits: ConsoleLimits }> = async (app, opts) => {
  await app.register(named(consoleSessionRoutes), opts);
  await app.register(named(consoleUserRoutes), { services: opts.services });
  await app.register(named(consoleKeyRoutes), { services: opts.services });
  await app.register(named(consoleAuditRoutes), { services: opts.services });
  await app.register(named(consoleSiteRoutes), { services: opts.services });
  await app.register(named(consoleSsoRoutes), opts);
  await app.register(named(consoleTotpRoutes), { services: opts.services });
  await app.register(named(consoleAgentRoutes), { services: opts.services });
  await app.register(named(consoleDebuggerRoutes), { services: opts.services });
  await app.register(named(consoleAnalyticsRoutes), { services: opts.services });
};
