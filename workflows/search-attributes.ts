import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/** Custom search attributes, so an operator finds a workspace's or subscription's workflows in the Temporal UI. */
export const WORKSPACE_ID = defineSearchAttributeKey('ConciergeWorkspaceId', SearchAttributeType.KEYWORD);
export const SUBSCRIPTION_ID = defineSearchAttributeKey('ConciergeSubscriptionId', SearchAttributeType.KEYWORD);
export const EVENT_TYPE = defineSearchAttributeKey('ConciergeEventType', SearchAttributeType.KEYWORD);
export const FILE_ID = defineSearchAttributeKey('ConciergeFileId', SearchAttributeType.KEYWORD);

/** Where a delivery stands (`attempting`, `retrying`, `delivered`, `failed`), upserted as its workflow goes. */
export const DELIVERY_STATUS = defineSearchAttributeKey('ConciergeDeliveryStatus', SearchAttributeType.KEYWORD);
/** The attempt a delivery is at (1-based). */
export const ATTEMPT = defineSearchAttributeKey('ConciergeAttempt', SearchAttributeType.INT);
/**
 * How a run of a send, indexing, extraction, upload, transcription, voice session or call ended (`succeeded`,
 * `failed`, `cancelled`; a call nobody answered: `unanswered`), upserted as it ends (workflows/outcome.ts), so
 * every failure is one query away while the run itself completes (its result carries the reason).
 */
export const OUTCOME = defineSearchAttributeKey('ConciergeOutcome', SearchAttributeType.KEYWORD);
