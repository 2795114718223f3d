import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/** Custom search attributes, so an operator finds a workspace's or subscription's workflows in the Temporal UI. */
export const WORKSPACE_ID = defineSearchAttributeKey('ConciergeWorkspaceId', SearchAttributeType.KEYWORD);
export const SUBSCRIPTION_ID = defineSearchAttributeKey('ConciergeSubscriptionId', SearchAttributeType.KEYWORD);
export const EVENT_TYPE = defineSearchAttributeKey('ConciergeEventType', SearchAttributeType.KEYWORD);
export const FILE_ID = defineSearchAttributeKey('ConciergeFileId', SearchAttributeType.KEYWORD);

/**
 * Where a delivery stands (`attempting`, `retrying`, `delivered`, `failed`, and since the webhook-failed-waits patch
 * `cancelled`), upserted as its workflow goes; a `failed` run stays open until a retry, so `failed` means failed now.
 */
export const DELIVERY_STATUS = defineSearchAttributeKey('ConciergeDeliveryStatus', SearchAttributeType.KEYWORD);
/** The attempts made in the delivery's current run (the dispatcher's attempt 1 included); before the webhook-failed-waits patch, the attempt it was at. */
export const ATTEMPT = defineSearchAttributeKey('ConciergeAttempt', SearchAttributeType.INT);
/**
 * A delivery's last failed attempt, as its kind only (`HTTP 500`, `timeout`, `connect`, …; never the answer's body
 * or a host: attributes are not encrypted), upserted since the webhook-failed-waits patch, so `temporal workflow
 * describe` shows why a delivery is retrying or failed (the full error is in the failed activity and the details).
 */
export const LAST_ERROR = defineSearchAttributeKey('ConciergeLastError', SearchAttributeType.KEYWORD);
/**
 * How a run of a send, indexing, extraction, upload, transcription, voice session or call ended (`succeeded`,
 * `failed`, `cancelled`; a call nobody answered: `unanswered`), upserted as it ends (workflows/outcome.ts), so
 * every failure is one query away while the run itself completes (its result carries the reason).
 */
export const OUTCOME = defineSearchAttributeKey('ConciergeOutcome', SearchAttributeType.KEYWORD);
