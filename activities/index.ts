import { conversationActivities } from './conversation';
import { voiceActivities } from './voice';
import type { ActivityDeps } from './deps';
import { withFailures } from './errors';
import { extractionActivities } from './extraction';
import { inboxActivities } from './inbox';
import { kbActivities } from './kb';
import { maintenanceActivities } from './maintenance';
import { messagingActivities } from './messaging';
import { uploadActivities } from './uploads';
import { webhookActivities } from './webhooks';

export type { ActivityDeps } from './deps';

/**
 * Every activity, by area, closed over its dependencies: the worker wires real ones,
 * tests their own. Errors leave through one mapper (errors.ts `toFailure`): an
 * OperationalError becomes a failure of its own type and retryability.
 */
export function createActivities(deps: ActivityDeps) {
  return withFailures({
    ...maintenanceActivities(deps),
    ...webhookActivities(deps),
    ...kbActivities(deps),
    ...messagingActivities(deps),
    ...conversationActivities(deps),
    ...uploadActivities(deps),
    ...extractionActivities(deps),
    ...voiceActivities(deps),
    ...inboxActivities(deps),
  });
}

export type Activities = ReturnType<typeof createActivities>;
