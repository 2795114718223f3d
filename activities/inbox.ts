import type { OperatorAction, OperatorActionResult } from '../domain/inbox/actions';
import type { ActivityDeps } from './deps';
import { withHeartbeat } from './errors';

/** The inbox's side of the conversation actor: a person's action, written and published (issue 31). */
export function inboxActivities(deps: ActivityDeps) {
  return {
    /**
     * One person's action (take, assign, reply, note, hand back, close) on the conversation: its rows, its timeline
     * entry, the visitor's and the team's live frames; a msgapp reply waits for its send. A refusal (taken by someone
     * else, the 24-hour window closed) is the result, not a failure: retrying would not change it.
     */
    async applyOperatorAction(input: { conversationId: string; workspaceId: string; action: OperatorAction }): Promise<OperatorActionResult> {
      return withHeartbeat(() => deps.services.inbox.apply(input.workspaceId, input.conversationId, input.action, deps.sender ?? null));
    },
  };
}
