import { Migration20261122000100Foundation } from './Migration20261122000100Foundation';
import { Migration20261122000200Webhooks } from './Migration20261122000200Webhooks';
import { Migration20261122000300KnowledgeBase } from './Migration20261122000300KnowledgeBase';
import { Migration20261122000400AgentsCustomers } from './Migration20261122000400AgentsCustomers';
import { Migration20261122000500CursorPrecision } from './Migration20261122000500CursorPrecision';
import { Migration20261122000600Messages } from './Migration20261122000600Messages';
import { Migration20261122000700Sites } from './Migration20261122000700Sites';
import { Migration20261122000800Chat } from './Migration20261122000800Chat';
import { Migration20261122000910WidgetIdentity } from './Migration20261122000910WidgetIdentity';
import { Migration20261124000100SealIdempotentResponses } from './Migration20261124000100SealIdempotentResponses';
import { Migration20261124110500MsgappNumberClaim } from './Migration20261124110500MsgappNumberClaim';
import { Migration20261125000100MsgappInboundEvents } from './Migration20261125000100MsgappInboundEvents';
import { Migration20261125120000WebhookInlineLease } from './Migration20261125120000WebhookInlineLease';
import { Migration20261125160000SitePageCommands } from './Migration20261125160000SitePageCommands';
import { Migration20261125170000AnalyticsIndexes } from './Migration20261125170000AnalyticsIndexes';
import { Migration20261125170500ProviderCredentials } from './Migration20261125170500ProviderCredentials';
import { Migration20261125171000SupportTickets } from './Migration20261125171000SupportTickets';
import { Migration20261125174000AnalyticsRollups } from './Migration20261125174000AnalyticsRollups';
import { Migration20261125180000CreditsLedger } from './Migration20261125180000CreditsLedger';
import { Migration20261127170000Voice } from './Migration20261127170000Voice';
import { Migration20261125181000McpServers } from './Migration20261125181000McpServers';
import { Migration20261125170000StructuredExtractions } from './Migration20261125170000StructuredExtractions';

/** Every migration, in order. Listed explicitly so no file glob is needed at run time. */
export const migrations = [
  { name: 'Migration20261122000100Foundation', class: Migration20261122000100Foundation },
  { name: 'Migration20261122000200Webhooks', class: Migration20261122000200Webhooks },
  { name: 'Migration20261122000300KnowledgeBase', class: Migration20261122000300KnowledgeBase },
  { name: 'Migration20261122000400AgentsCustomers', class: Migration20261122000400AgentsCustomers },
  { name: 'Migration20261122000500CursorPrecision', class: Migration20261122000500CursorPrecision },
  { name: 'Migration20261122000600Messages', class: Migration20261122000600Messages },
  { name: 'Migration20261122000700Sites', class: Migration20261122000700Sites },
  { name: 'Migration20261122000800Chat', class: Migration20261122000800Chat },
  { name: 'Migration20261122000910WidgetIdentity', class: Migration20261122000910WidgetIdentity },
  { name: 'Migration20261124000100SealIdempotentResponses', class: Migration20261124000100SealIdempotentResponses },
  { name: 'Migration20261124110500MsgappNumberClaim', class: Migration20261124110500MsgappNumberClaim },
  { name: 'Migration20261125000100MsgappInboundEvents', class: Migration20261125000100MsgappInboundEvents },
  { name: 'Migration20261125120000WebhookInlineLease', class: Migration20261125120000WebhookInlineLease },
  { name: 'Migration20261125160000SitePageCommands', class: Migration20261125160000SitePageCommands },
  { name: 'Migration20261125170000AnalyticsIndexes', class: Migration20261125170000AnalyticsIndexes },
  { name: 'Migration20261125170500ProviderCredentials', class: Migration20261125170500ProviderCredentials },
  { name: 'Migration20261125171000SupportTickets', class: Migration20261125171000SupportTickets },
  { name: 'Migration20261125174000AnalyticsRollups', class: Migration20261125174000AnalyticsRollups },
  { name: 'Migration20261125180000CreditsLedger', class: Migration20261125180000CreditsLedger },
  { name: 'Migration20261125181000McpServers', class: Migration20261125181000McpServers },
  { name: 'Migration20261125170000StructuredExtractions', class: Migration20261125170000StructuredExtractions },
  { name: 'Migration20261127170000Voice', class: Migration20261127170000Voice },
];
