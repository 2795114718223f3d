/**
 * Entities are declared with `defineEntity` (no decorators: esbuild and swc emit no
 * decorator metadata), one file per aggregate. Table and column names are snake_case;
 * the SQL in `db/migrations` is the source of truth for constraints and indexes,
 * and test/db/entities-schema.suite.ts checks that every entity agrees with it.
 * References between tables are plain id columns (no relations): each aggregate's module
 * queries its own tables only.
 */
import { Agent } from './agents';
import { AnalyticsConversation, AnalyticsConversationSlot, AnalyticsMessageHour } from './analytics';
import { CreditBalance, CreditLedgerEntry } from './billing';
import { McpServer } from './mcp';
import { ChatMessage, Conversation, ConversationEvent, ConversationTask } from './conversations';
import { Credential } from './credentials';
import { Customer, CustomerIdentity } from './customers';
import { StructuredExtraction } from './extractions';
import { IdempotencyKey } from './idempotency';
import { KbChunk, KbDocument, KbFile, KbFolder } from './kb';
import { ApiKey, RetiredKeySecret } from './keys';
import { Message, MsgappInboundEvent, UsageRecord } from './messages';
import { WebhookAttempt, WebhookDelivery, WebhookEvent, WebhookSubscription } from './webhooks';
import { SupportTicket, SupportTicketMessage } from './support';
import { Site, WidgetUpload, WidgetUploadChunk } from './widget';
import { WidgetFeedback } from './feedback';
import { Workspace } from './workspaces';
import { Call, Recording, VoiceRecordingChunk, VoiceSession, VoiceWorker } from './voice';
import { BlobHold } from './storage';
import { TeamAvailability } from './team';
import { ConsoleLink, ConsoleSession, ConsoleUser } from './people';
import { AuditEvent } from './audit';
import { SsoDomain, SsoSettings, UserIdentity } from './sso';
import { SignInPolicy, UserTotp } from './totp';
import { CannedReply, ConversationNote, InboxAgent, InboxSettings } from './inbox';

export * from './agents';
export * from './analytics';
export * from './billing';
export * from './mcp';
export * from './conversations';
export * from './credentials';
export * from './customers';
export * from './extractions';
export * from './idempotency';
export * from './kb';
export * from './keys';
export * from './messages';
export * from './support';
export * from './webhooks';
export * from './widget';
export * from './feedback';
export * from './workspaces';
export * from './voice';
export * from './storage';
export * from './team';
export * from './people';
export * from './audit';
export * from './sso';
export * from './totp';
export * from './inbox';

export const allEntities = [
  AnalyticsConversation,
  AnalyticsConversationSlot,
  AnalyticsMessageHour,
  CreditBalance,
  CreditLedgerEntry,
  McpServer,
  Workspace,
  ApiKey,
  RetiredKeySecret,
  IdempotencyKey,
  Credential,
  KbFolder,
  KbDocument,
  KbFile,
  KbChunk,
  WebhookSubscription,
  WebhookEvent,
  WebhookDelivery,
  WebhookAttempt,
  Agent,
  Customer,
  CustomerIdentity,
  Conversation,
  ConversationEvent,
  ChatMessage,
  ConversationTask,
  Message,
  UsageRecord,
  MsgappInboundEvent,
  Site,
  WidgetUpload,
  WidgetUploadChunk,
  WidgetFeedback,
  SupportTicket,
  SupportTicketMessage,
  StructuredExtraction,
  VoiceSession,
  Call,
  Recording,
  VoiceRecordingChunk,
  VoiceWorker,
  BlobHold,
  TeamAvailability,
  ConsoleUser,
  ConsoleSession,
  ConsoleLink,
  AuditEvent,
  SsoSettings,
  SsoDomain,
  UserIdentity,
  UserTotp,
  SignInPolicy,
  ConversationNote,
  CannedReply,
  InboxAgent,
  InboxSettings,
];
