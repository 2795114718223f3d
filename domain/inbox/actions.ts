/**
 * A person's action on a conversation from the inbox (issue 31). Every one goes through the conversation's actor
 * (the `operatorAction` update of workflows/conversation.ts), whose argument names who acts, so the workflow's
 * history shows who did what; the update's handler runs one activity that writes and publishes it
 * (InboxService.apply).
 */
export interface OperatorActor {
  id: string;
  email: string;
  name: string | null;
}

export type OperatorAction =
  /** Takes it (from the queue, or from nobody): the agent stops answering; one person at most holds it. */
  | { kind: 'take'; actor: OperatorActor }
  /** Gives it to a teammate (from the queue, or from oneself); `round_robin`: the queue's automatic assignment. */
  | { kind: 'assign'; actor: OperatorActor; assignee_id: string; how?: 'round_robin' }
  /** Back to the queue from `from`, who went offline or away (the queue's upkeep, acting as SYSTEM_ACTOR). */
  | { kind: 'requeue'; actor: OperatorActor; from: string; reason: 'offline' | 'away' }
  /** A reply to the customer on the conversation's own channel; on msgapp outside the 24-hour window, a template. */
  | { kind: 'reply'; actor: OperatorActor; id: string; text?: string; template?: { name: string; language?: string; variables?: string[] }; attachments?: string[] }
  /** An internal note: the team's only, never the customer's. */
  | { kind: 'note'; actor: OperatorActor; id: string; text: string }
  /** Back to the agent: it answers the next message. */
  | { kind: 'hand_back'; actor: OperatorActor }
  /** Closed, with the reason. */
  | { kind: 'close'; actor: OperatorActor; reason: string };

export type OperatorActionKind = OperatorAction['kind'];

/** Who acts when the queue's upkeep assigns or re-queues (its history reads "assign by system"). */
export const SYSTEM_ACTOR: OperatorActor = { id: 'system', email: 'system', name: 'Automatic assignment' };

/** The reply's and the note's ids are named by the API before the update, so a retried activity writes them once. */

/** What the action did (`ok`), or why it was refused: a domain error's code and message, which the API answers. */
export type OperatorActionResult = { ok: true; message_id?: string; note_id?: string } | { ok: false; code: string; message: string };
